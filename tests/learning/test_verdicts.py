"""Every gate verdict of ``prme_core.learning.verdicts`` and ``prme_core.profiles.verdicts``: its
pass case and each reason it fails.

Split and proposal verdicts judge pure evaluations of synthetic receipts with a planted signal;
holdout, evidence and runtime verdicts judge the learning lab's real retrievals (one store,
built once for the module).
"""

import uuid

import pytest

from prme_core import MemoryClient
from prme_core.learning.config import LearningConfig
from prme_core.learning.offline import evaluate_learning
from prme_core.learning.stages import HoldoutOutcome, SplitSummary, candidate_profile_id, holdout_stage, split_stage
from prme_core.learning.verdicts import (
    coverage_verdict,
    holdout_gate_verdict,
    holdout_memory_verdict,
    offline_gate_verdict,
    replay_verdict,
)
from prme_core.profiles.verdicts import evidence_bound_verdict, runtime_verdict
from prme_core.retrieval.config import ScoringWeights
from tests.learning.verdict_inputs import REFUSALS, RefusingClient, planted_snapshot
from tests.learning_lab import HOLDOUT_CONFIG, LEARNING_CONFIG, build_lab

OWNER, SCOPES = "alice", ["personal"]
UNREACHABLE = 100_000  # more query groups than any test has: coverage and holdout minimums that cannot be met


# --- synthetic evidence (pure) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def snapshot():
    return planted_snapshot(OWNER)


@pytest.fixture(scope="module")
def split(snapshot) -> SplitSummary:
    return split_stage(snapshot, owner=OWNER, scopes=SCOPES)


@pytest.fixture(scope="module")
def proposal(snapshot):
    return evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES)


def test_coverage_verdict_passes_with_enough_training_and_validation_groups(split):
    verdict = coverage_verdict(split)
    c = split.coverage
    assert verdict.passed and c.training_queries >= 20 and c.validation_queries >= 20
    assert verdict.description == f"{c.training_queries} training and {c.validation_queries} validation groups"
    assert verdict.facts["min_training_groups"] == verdict.facts["min_validation_groups"] == 20
    assert (verdict.facts["training_groups"], verdict.facts["validation_groups"]) == (
        c.training_queries,
        c.validation_queries,
    )


@pytest.mark.parametrize("short", ["training", "validation"])
def test_coverage_verdict_fails_when_either_split_has_too_few_groups(snapshot, short):
    config = LearningConfig(**{f"min_{short}_queries": UNREACHABLE})
    split = split_stage(snapshot, owner=OWNER, scopes=SCOPES, config=config)
    verdict = coverage_verdict(split)
    c = split.coverage
    assert not verdict.passed and verdict.facts[f"min_{short}_groups"] == UNREACHABLE
    assert verdict.description.startswith(
        f"insufficient coverage: {c.training_queries}/{split.min_training_queries} training and "
        f"{c.validation_queries}/{split.min_validation_queries} validation groups"
    )
    assert verdict.description.endswith("collect more judged queries for this scope set")


def test_replay_verdict_passes_when_every_judged_candidate_replays_exactly(split):
    verdict = replay_verdict(split)
    assert verdict.passed and split.replay_mismatches == 0 and split.replay_candidates > 0
    unit = "recorded returned lists" if split.fit_path == "pool" else "judged candidates"
    how = (
        "re-ranking the recorded pools reproduces all" if split.fit_path == "pool" else "replay at unity reproduces all"
    )
    assert verdict.description == f"{how} {split.replay_candidates} {unit} exactly"
    assert verdict.facts == {
        "fit_path": split.fit_path,
        "replayed": split.replay_candidates,
        "replayed_unit": unit,
        "mismatches": 0,
        "largest_difference": split.replay_worst_difference,
    }


def test_replay_verdict_fails_when_a_judged_candidate_does_not_replay(split):
    broken = SplitSummary(**{**dict(split), "replay_mismatches": 3, "replay_worst_difference": 0.25})
    verdict = replay_verdict(broken)
    assert not verdict.passed and verdict.facts["mismatches"] == 3 and verdict.facts["largest_difference"] == 0.25
    assert verdict.description.startswith("3 judged candidates do not replay to what was recorded")


def test_offline_gate_verdict_passes_an_improvement_with_its_gain_and_interval(proposal):
    verdict = offline_gate_verdict(proposal)
    low, high = proposal.validation_gain_interval
    e_low, e_high = proposal.evidence_gain_interval
    assert verdict.passed and proposal.decision == "improved_on_observed_candidates"
    assert verdict.description == (
        f"NDCG gain {proposal.evidence_ndcg_gain:+.4f} [{e_low:+.4f}, {e_high:+.4f}] over "
        f"{proposal.evidence_groups} validation and cross-fitted groups (sign-flip p "
        f"{proposal.evidence_sign_flip_p:.3g} ≤ 0.025); the proposal itself "
        f"{proposal.validation_ndcg_gain:+.4f} [{low:+.4f}, {high:+.4f}] on the validation groups (check: interval)"
    )
    assert (verdict.facts["interval_low"], verdict.facts["interval_high"]) == (low, high)
    assert (verdict.facts["evidence_interval_low"], verdict.facts["evidence_interval_high"]) == (e_low, e_high)
    assert verdict.facts["evidence_groups"] == len(proposal.queries)  # every training group is cross-fitted
    assert verdict.facts["min_ndcg_gain"] == 0.01 and verdict.facts["input_checksum"] == proposal.input_checksum
    assert verdict.facts["multiplier_lexical"] == proposal.multipliers.lexical


@pytest.mark.parametrize(
    ("config", "decision"),
    [
        ({"min_training_queries": UNREACHABLE}, "insufficient_data"),
        ({"min_ndcg_gain": 1.0}, "no_improvement"),
    ],
)
def test_offline_gate_verdict_fails_each_decision_other_than_improvement(snapshot, config, decision):
    report = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config=config)
    verdict = offline_gate_verdict(report)
    assert report.decision == decision
    assert not verdict.passed and verdict.description == f"offline gate: {decision}"
    assert verdict.facts["decision"] == decision


# --- the learning lab (real retrievals) ----------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The lab's passing proposal, its passing holdout outcome, the candidate profile built from
    them, a non-improving proposal and the running pipeline's identity."""
    url = f"duckdb:///{tmp_path_factory.mktemp('verdicts') / 'lab.duckdb'}"
    with MemoryClient(url) as client:
        build_lab(client)
        proposal = client.evaluate_learning(OWNER, scopes=SCOPES, config=LEARNING_CONFIG)
        outcome = holdout_stage(client, proposal, HOLDOUT_CONFIG)
        profile = client.create_ranking_profile(
            proposal,
            outcome.evaluation,
            owner=OWNER,
            profile_id=candidate_profile_id(proposal, outcome.evaluation),
            baseline_profile_id=outcome.baseline_profile_id,
        )
        insufficient = holdout_stage(client, proposal, {**HOLDOUT_CONFIG, "min_query_groups": UNREACHABLE})
        not_improved = holdout_stage(client, proposal, {**HOLDOUT_CONFIG, "min_ndcg_gain": 1.0})
        other_proposal = client.evaluate_learning(
            OWNER, scopes=SCOPES, config={**LEARNING_CONFIG, "min_ndcg_gain": 1.0}
        )
        running = client.running_feature_identity(), client.settings.scoring
    return dict(
        proposal=proposal,
        outcome=outcome,
        profile=profile,
        insufficient=insufficient,
        not_improved=not_improved,
        other_proposal=other_proposal,
        running=running,
    )


def _changed(outcome: HoldoutOutcome, **changes) -> HoldoutOutcome:
    return HoldoutOutcome(**{**dict(outcome), **changes})


def test_holdout_memory_verdict_passes_when_the_digest_is_unchanged(lab):
    outcome = lab["outcome"]
    verdict = holdout_memory_verdict(outcome)
    assert outcome.status == "evaluated" and verdict.passed
    assert verdict.description == "memory unchanged across all paired retrievals"
    assert verdict.facts == {
        "status": "evaluated",
        "memory_before": outcome.memory_before,
        "memory_after": outcome.memory_after,
    }


@pytest.mark.parametrize(("error", "status"), REFUSALS, ids=[s for _, s in REFUSALS])
def test_holdout_verdicts_fail_for_each_stage_outcome_without_an_evaluation(lab, error, status):
    outcome = holdout_stage(RefusingClient(error), lab["proposal"], HOLDOUT_CONFIG)
    memory, gate = holdout_memory_verdict(outcome), holdout_gate_verdict(outcome)
    assert outcome.status == status and outcome.evaluation is None
    assert not memory.passed and not gate.passed and gate.facts == {"status": status}
    if status == "memory_changed":
        assert memory.description == "memory changed while the holdout ran; pause writes for this owner and rerun"
        assert (memory.facts["memory_before"], memory.facts["memory_after"]) == ("a" * 64, "b" * 64)
    else:
        assert memory.description == f"no holdout evaluation ({status}): {error}"
    assert gate.description == f"no holdout evaluation ({status}): {error}"


def test_holdout_memory_verdict_fails_an_evaluated_outcome_whose_digests_differ(lab):
    verdict = holdout_memory_verdict(_changed(lab["outcome"], memory_after="c" * 64))
    assert not verdict.passed and verdict.facts["memory_after"] == "c" * 64


def test_holdout_gate_verdict_passes_an_improvement_over_enough_groups(lab):
    e = lab["outcome"].evaluation
    verdict = holdout_gate_verdict(lab["outcome"])
    assert verdict.passed and e.decision == "improved_full_retrieval"
    assert verdict.description == (
        f"holdout NDCG gain {e.ndcg_gain:+.4f} over {e.coverage.query_groups} groups; sign-flip p "
        f"{e.sign_flip_p:.3g} ≤ 0.025, the level look 1 at the partition's proposal 1 may spend of the 0.05 budget"
    )
    assert (verdict.facts["offline_look"], verdict.facts["level_cap"]) == (1, 0.025)
    assert verdict.facts["min_query_groups"] == HOLDOUT_CONFIG["min_query_groups"]
    assert verdict.facts["baseline_profile_id"] is None and verdict.facts["interval_low"] > 0


@pytest.mark.parametrize(
    ("variant", "decision"), [("insufficient", "insufficient_data"), ("not_improved", "no_improvement")]
)
def test_holdout_gate_verdict_fails_each_decision_other_than_improvement(lab, variant, decision):
    outcome = lab[variant]
    verdict = holdout_gate_verdict(outcome)
    assert outcome.status == "evaluated" and outcome.evaluation.decision == decision
    assert not verdict.passed and verdict.description == f"holdout gate: {decision}"
    assert verdict.facts["decision"] == decision
    assert holdout_memory_verdict(outcome).passed  # the memory gate is independent of the decision


def test_evidence_bound_verdict_passes_a_profile_of_exactly_the_gated_reports_on_a_current_baseline(lab):
    profile = lab["profile"]
    verdict = evidence_bound_verdict(profile, lab["proposal"], lab["outcome"], None)
    assert verdict.passed
    assert verdict.description == "the profile embeds both passing reports and its baseline is current"
    assert verdict.facts["profile_id"] == str(profile.profile_id) and verdict.facts["active_profile_id"] is None


@pytest.mark.parametrize("mismatch", ["proposal", "holdout", "no_evaluation"])
def test_evidence_bound_verdict_fails_when_the_profile_does_not_embed_the_gated_reports(lab, mismatch):
    proposal, outcome = lab["proposal"], lab["outcome"]
    if mismatch == "proposal":
        proposal = lab["other_proposal"]
    elif mismatch == "holdout":
        outcome = lab["not_improved"]
    else:
        outcome = _changed(outcome, status="memory_changed", evaluation=None)
    verdict = evidence_bound_verdict(lab["profile"], proposal, outcome, None)
    assert not verdict.passed and verdict.description == "the profile does not embed the gated proposal and holdout"


def test_evidence_bound_verdict_fails_when_the_holdout_ran_against_another_baseline(lab):
    outcome = _changed(lab["outcome"], baseline_profile_id=uuid.uuid4())
    verdict = evidence_bound_verdict(lab["profile"], lab["proposal"], outcome, None)
    assert not verdict.passed
    assert verdict.description == "the profile names a different baseline than the holdout ran against"


def test_evidence_bound_verdict_fails_a_stale_baseline(lab):
    active = uuid.uuid4()
    verdict = evidence_bound_verdict(lab["profile"], lab["proposal"], lab["outcome"], active)
    assert not verdict.passed and verdict.facts["active_profile_id"] == str(active)
    assert verdict.description.startswith("stale baseline: the active profile changed since the holdout")


def test_runtime_verdict_passes_on_the_pipeline_the_profile_learned_on(lab):
    features, scoring = lab["running"]
    verdict = runtime_verdict(lab["profile"], running_features_sha256=features, running_scoring=scoring)
    assert verdict.passed and verdict.facts["base_scoring_matches"] is True
    assert verdict.facts["recorded_feature_identity"] == verdict.facts["running_feature_identity"] == features


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("features", "feature_identity_mismatch"),
        ("scoring", "base_scoring_mismatch"),
        ("fusion", "rank_fusion_scoring"),
    ],
)
def test_runtime_verdict_fails_for_each_incompatibility(lab, change, reason):
    features, scoring = lab["running"]
    if change == "features":
        features = "0" * 64
    elif change == "scoring":
        scoring = ScoringWeights.model_validate({**scoring.model_dump(), "recency_lambda": scoring.recency_lambda * 2})
    else:
        scoring = ScoringWeights.model_validate({**scoring.model_dump(), "fusion": "rrf"})
    verdict = runtime_verdict(lab["profile"], running_features_sha256=features, running_scoring=scoring)
    assert not verdict.passed and verdict.description == f"inapplicable to the running pipeline: {reason}"
