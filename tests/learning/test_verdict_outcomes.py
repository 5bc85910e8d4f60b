"""The two kinds of "no" of the gate verdicts: an expected "no" (not enough evidence, no
improvement) says what is needed; anything else is an integrity failure. Pure: synthetic
receipts with a planted signal, and holdout runs refused the way the store refuses them."""

import math

import pytest

from prme_assets.outcome import OUTCOME_KEYS, PREFIX, outcome_tags
from prme_core.learning.config import LearningConfig
from prme_core.learning.offline import evaluate_learning
from prme_core.learning.stages import SplitSummary, holdout_stage, split_stage
from prme_core.learning.verdicts import (
    coverage_verdict,
    holdout_gate_verdict,
    holdout_memory_verdict,
    offline_gate_verdict,
    offline_groups_needed,
    replay_verdict,
)
from tests.learning.verdict_inputs import REFUSALS, RefusingClient, planted_snapshot

OWNER, SCOPES = "alice", ["personal"]


@pytest.fixture(scope="module")
def snapshot():
    return planted_snapshot(OWNER)


def test_a_coverage_shortfall_is_an_expected_no_that_says_how_many_more_judged_queries(snapshot):
    config = LearningConfig(min_training_queries=150, min_validation_queries=30)
    split = split_stage(snapshot, owner=OWNER, scopes=SCOPES, config=config)
    verdict = coverage_verdict(split)
    c = split.coverage
    more = max(
        math.ceil((150 - c.training_queries) / (1 - config.validation_fraction)),
        math.ceil(max(0, 30 - c.validation_queries) / config.validation_fraction),
    )
    assert (verdict.passed, verdict.expected, verdict.outcome) == (False, True, "expected_no")
    assert verdict.facts["decision"] == "insufficient_data" and verdict.facts["more_groups_needed"] == more
    assert (
        verdict.facts["needs"]
        == f"needs about {more} more judged queries to reach 150 training and 30 validation groups"
    )


def test_a_replay_mismatch_is_an_integrity_failure(snapshot):
    split = split_stage(snapshot, owner=OWNER, scopes=SCOPES)
    broken = SplitSummary(**{**dict(split), "replay_mismatches": 1, "replay_worst_difference": 0.1})
    assert replay_verdict(split).outcome == "passed"
    assert replay_verdict(broken).outcome == "integrity_failure" and "needs" not in replay_verdict(broken).facts


def test_an_offline_no_improvement_says_what_the_observed_gain_would_need(snapshot):
    report = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config={"min_ndcg_gain": 1.0})
    verdict = offline_gate_verdict(report)
    estimate, more = offline_groups_needed(report)
    assert report.decision == "no_improvement" and report.validation_ndcg_gain > 0
    assert more is not None and verdict.outcome == "expected_no" and verdict.facts["more_groups_needed"] == more
    assert verdict.facts["groups_for_power"] == estimate.groups_for_power
    assert verdict.facts["observed_sd"] == estimate.sd
    assert verdict.facts["needs"] == (
        f"needs about {more} more judged queries"
        if more
        else "enough judged queries for 80% power at the observed gain"
    )


def test_a_small_noisy_offline_gain_needs_about_n_more_judged_queries(snapshot):
    report = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config={"min_ndcg_gain": 1.0})
    validation = [q for q in report.queries if q.split == "validation"]
    noisy = {
        q.group_id: q.model_copy(update={"baseline_ndcg": 0.5, "candidate_ndcg": 0.82 if i % 2 else 0.22})
        for i, q in enumerate(validation)
    }  # differences alternate -0.28 / +0.32
    noisy_crossfit = tuple(
        c.model_copy(update={"baseline_ndcg": 0.5, "candidate_ndcg": 0.82 if i % 2 else 0.22})
        for i, c in enumerate(report.crossfit)
    )  # the gate's evidence: the validation and the cross-fitted training groups
    verdict = offline_gate_verdict(
        report.model_copy(
            update={"queries": tuple(noisy.get(q.group_id, q) for q in report.queries), "crossfit": noisy_crossfit}
        )
    )
    more = verdict.facts["more_groups_needed"]
    assert more > len(report.queries) and verdict.facts["needs"] == f"needs about {more} more judged queries"


def test_an_offline_insufficient_data_says_the_coverage_shortfall(snapshot):
    report = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config={"min_training_queries": 1000})
    verdict = offline_gate_verdict(report)
    assert report.decision == "insufficient_data" and verdict.outcome == "expected_no"
    assert verdict.facts["needs"].startswith("needs about ") and verdict.facts["more_groups_needed"] > 0


def test_a_proposal_without_any_gain_needs_no_measurable_gain_rather_than_a_number(snapshot):
    report = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES)
    flat = [q.model_copy(update={"candidate_ndcg": q.baseline_ndcg}) for q in report.queries]
    flat_crossfit = tuple(c.model_copy(update={"candidate_ndcg": c.baseline_ndcg}) for c in report.crossfit)
    estimate, more = offline_groups_needed(
        report.model_copy(update={"queries": tuple(flat), "crossfit": flat_crossfit})
    )
    assert more is None and estimate.groups_for_power is None  # the function the verdict maps to "no measurable gain"


OUTCOME_OF_STATUS = {
    "memory_changed": "integrity_failure",
    "query_overlap": "integrity_failure",
    "no_holdout_queries": "expected_no",
}


@pytest.mark.parametrize(("error", "status"), REFUSALS, ids=[s for _, s in REFUSALS])
def test_a_holdout_without_an_evaluation_is_expected_only_when_no_holdout_queries_are_registered(
    snapshot, error, status
):
    outcome = OUTCOME_OF_STATUS[status]
    proposal = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES)
    refused = holdout_stage(RefusingClient(error), proposal)
    assert holdout_memory_verdict(refused).outcome == holdout_gate_verdict(refused).outcome == outcome


def test_the_outcome_tags_hold_every_key_with_exact_numbers_and_no_stopping_gate_on_a_pass(snapshot):
    report = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES)
    passed = outcome_tags("offline_gate_passed", offline_gate_verdict(report))
    assert set(passed) == {PREFIX + k for k in OUTCOME_KEYS}
    assert (passed["prme/outcome"], passed["prme/stopped_by"], passed["prme/needs"]) == ("passed", "", "")
    assert float(passed["prme/gain"]) == report.validation_ndcg_gain
    assert float(passed["prme/interval_low"]) == report.validation_gain_interval[0]
    failed = outcome_tags(
        "offline_gate_passed",
        offline_gate_verdict(evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config={"min_ndcg_gain": 1.0})),
    )
    assert (failed["prme/outcome"], failed["prme/stopped_by"], failed["prme/decision"]) == (
        "expected_no",
        "offline_gate_passed",
        "no_improvement",
    )
