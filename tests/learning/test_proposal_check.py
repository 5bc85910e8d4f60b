"""The offline gate's check of the proposal itself on the validation groups (version 3,
``LearningConfig.proposal_check``): ``interval`` — the proposal's bootstrap interval there reaches
0 — replaced ``mean`` — its mean there is not negative — when the validation share went from 30%
to 15%. Constructed per-group differences show what each rule does at the stated volumes; a
report records the check it was judged by, and one written before the field keeps ``mean``."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from prme_core.learning.bootstrap import bootstrap_interval, sign_flip_p_value
from prme_core.learning.config import DEFAULT_VALIDATION_FRACTION, LearningConfig
from prme_core.learning.offline import evaluate_learning
from prme_core.learning.power import groups_for_power
from prme_core.learning.proposal import LearningEvaluation, offline_gate
from prme_core.learning.verdicts import offline_gate_verdict, proposal_check
from tests.learning.test_gates_v3 import paired
from tests.learning.verdict_inputs import planted_snapshot

PASSED = "improved_on_observed_candidates"
CONFIG = LearningConfig().resolved()


def decide(evidence: np.ndarray, validation: np.ndarray, check: str) -> str:
    """The version-3 gate over ``evidence`` (every judged group), the proposal itself measured by
    ``validation`` (its own groups), judged by ``check``."""
    return offline_gate(
        schema_version=3,
        config=CONFIG.model_copy(update={"proposal_check": check}),
        ndcg_gain=float(evidence.mean()),
        interval_low=0.0,
        pairwise_gain=0.0,
        p_value=sign_flip_p_value(evidence, samples=2000, seed=42),
        proposal_gain=float(validation.mean()),
        proposal_interval=bootstrap_interval(validation, samples=2000, seed=42),
    )


def test_the_default_is_the_interval_check_over_a_15_percent_share():
    assert DEFAULT_VALIDATION_FRACTION == 0.15 and LearningConfig().validation_fraction == 0.15
    assert LearningConfig().proposal_check is None and CONFIG.proposal_check == "interval"
    with pytest.raises(ValidationError, match="proposal_check"):
        LearningConfig(proposal_check="median")


def test_a_true_gain_at_the_volume_its_power_figure_names_passes_and_the_mean_check_loses_some_of_it():
    rng = np.random.default_rng(5)
    needed = groups_for_power(paired(rng, 4000, 0.03), alpha=0.025).groups_for_power
    validation_groups = round(needed * DEFAULT_VALIDATION_FRACTION)
    by_check = {"interval": 0, "mean": 0}
    draws = 300
    for _ in range(draws):
        evidence = paired(rng, needed, 0.03)
        validation = evidence[:validation_groups]  # the proposal's own groups are part of the evidence
        for check in by_check:
            by_check[check] += decide(evidence, validation, check) == PASSED
    # 80% for the sign-flip test alone by the normal approximation; the minimum gain costs a little
    assert by_check["interval"] / draws >= 0.7, by_check
    # a true +0.03 over a few dozen validation groups has a negative mean often enough to matter
    assert by_check["mean"] < by_check["interval"], by_check


def test_noise_passes_at_most_at_the_gates_level_under_either_check():
    rng = np.random.default_rng(6)
    draws = 400
    for check in ("interval", "mean"):
        passed = sum(decide(e := paired(rng, 400, 0.0), e[:60], check) == PASSED for _ in range(draws))
        assert passed / draws <= 0.025 + 0.02, (check, passed)


def test_a_proposal_measurably_worse_on_its_validation_groups_is_refused_whatever_its_evidence():
    rng = np.random.default_rng(7)
    evidence = paired(rng, 600, 0.06)  # the cross-fitted folds gained a lot
    validation = paired(rng, 90, -0.12)  # the proposal itself lost on its own groups
    assert bootstrap_interval(validation, samples=2000, seed=42)[1] < 0
    assert sign_flip_p_value(evidence, samples=2000, seed=42) <= 0.025
    assert decide(evidence, validation, "interval") == "no_improvement"
    assert decide(evidence, validation, "mean") == "no_improvement"


def test_a_negative_mean_whose_interval_reaches_zero_passes_only_the_interval_check():
    rng = np.random.default_rng(8)
    evidence = paired(rng, 600, 0.05)
    validation = np.concatenate([paired(rng, 59, 0.05), [-0.9]])  # one bad group pulls the mean below 0
    validation = validation - max(validation.mean(), 0.0) - 0.001
    low, high = bootstrap_interval(validation, samples=2000, seed=42)
    assert validation.mean() < 0 <= high
    assert decide(evidence, validation, "interval") == PASSED
    assert decide(evidence, validation, "mean") == "no_improvement"


@pytest.fixture(scope="module")
def report() -> LearningEvaluation:
    return evaluate_learning(planted_snapshot("alice"), owner="alice", scopes=["personal"])


def test_a_report_records_its_check_and_one_written_before_the_field_keeps_the_mean_rule(report):
    assert report.config.proposal_check == "interval" and report.decision == PASSED
    assert offline_gate_verdict(report).facts["proposal_check"] == "interval"
    data = report.model_dump(mode="json")
    assert data["config"]["proposal_check"] == "interval"
    older = {**data, "config": {k: v for k, v in data["config"].items() if k != "proposal_check"}}
    before = LearningEvaluation.model_validate(older)  # its validation mean is positive: both rules agree
    assert before.config.proposal_check is None and proposal_check(before) == "mean"
    assert "proposal_check" not in before.model_dump(mode="json")["config"]  # the older bytes stay as they were
    assert offline_gate_verdict(before).facts["proposal_check"] == "mean"


def test_only_a_version_3_report_may_record_a_proposal_check(report):
    data = report.model_dump(mode="json")
    with pytest.raises(ValidationError, match="only a version-3 report records its proposal check"):
        LearningEvaluation.model_validate({**data, "schema_version": 2})
