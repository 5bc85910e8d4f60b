"""How a learning run ends in Dagster: an expected "no" (not enough evidence, no improvement) is a
successful run whose later stages are skipped, with the failed gate's reason and what is needed;
an integrity failure fails the run. Either way no profile is created or activated."""

import json

import dagster as dg
import pytest

from prme_assets.activation import activation_request
from prme_assets.check_records import latest_checks
from prme_assets.checks import GATE_CHECKS
from prme_assets.definitions import LEARNING_ASSETS
from prme_assets.outcome import PREFIX, RUN_TAG_KEYS, run_outcome
from prme_assets.partitions import encode_target
from prme_assets.resources import LearningPolicyResource
from prme_core import MemoryClient
from prme_core.learning.pool_fit import choose_factor
from tests.dagster_jobs import SMALL_LAB_POLICY, lab_resources
from tests.lab_runs import check_evaluation, materialized, plant_replay_mismatches, run_lab
from tests.learning_lab import TOPICS, make_lab, write_during_holdout

OWNER, SCOPES = "alice", ("personal",)
PARTITION = encode_target(OWNER, SCOPES)
STAGES = ("feedback_snapshot", "query_split", "ranking_proposal", "full_retrieval_holdout", "candidate_profile")
CHECK_STEPS = {name: f"{asset}_{name}" for asset, name in GATE_CHECKS}


def _steps(result) -> dict[str, str]:
    """The last step event of each step: STEP_SUCCESS, STEP_FAILURE or STEP_SKIPPED (absent: not executed)."""
    kinds = ("STEP_SUCCESS", "STEP_FAILURE", "STEP_SKIPPED")
    return {e.step_key: e.event_type_value for e in result.all_events if e.event_type_value in kinds}


def _logged(instance, result) -> str:
    return "\n".join(entry.user_message for entry in instance.all_logs(result.run_id))


def _refused(url, instance) -> str:
    reason = activation_request(instance, PARTITION, lab_resources(url)["prme_store"])
    assert isinstance(reason, str), reason
    return reason


def _no_profiles(url) -> bool:
    with MemoryClient(url) as client:
        return client.list_ranking_profiles(OWNER) == [] and client.get_active_ranking_profile(OWNER, SCOPES) is None


def _assert_expected_no(result, gate, declining_stage):
    """The run succeeded; the gate failed with WARN severity; the declining stage ran and
    materialized nothing; every step after it was skipped."""
    assert result.success
    evaluation, meta = check_evaluation(result, gate)
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    assert evaluation.partition == PARTITION and meta["outcome"] == "expected_no"
    assert meta["reason"] == evaluation.description
    steps = _steps(result)
    assert steps[declining_stage] == "STEP_SUCCESS" and declining_stage not in materialized(result)
    later = STAGES[STAGES.index(declining_stage) + 1 :]
    later_checks = [CHECK_STEPS[name] for asset, name in GATE_CHECKS if asset in (declining_stage, *later)]
    assert all(steps[key] == "STEP_SKIPPED" for key in (*later, *later_checks)), steps
    assert "STEP_FAILURE" not in steps.values()
    return meta


def test_insufficient_coverage_ends_the_run_successfully_with_the_later_stages_skipped(lab_url, instance):
    make_lab(lab_url, topics=tuple(TOPICS[:8]))
    result = run_lab(lab_url, instance)
    meta = _assert_expected_no(result, "coverage_sufficient", "ranking_proposal")
    assert materialized(result) == {"feedback_snapshot", "query_split"}
    assert meta["needs"].startswith("needs about ") and meta["more_groups_needed"] > 0
    assert check_evaluation(result, "baseline_replay_exact")[0].passed
    outcome = run_outcome(instance, result.run_id)
    assert outcome["outcome"] == "expected_no" and outcome["stopped_by"] == "coverage_sufficient"
    assert outcome["decision"] == "insufficient_data" and outcome["needs"] == meta["needs"]
    assert outcome["reason"].startswith("insufficient coverage") and "gain" not in outcome
    assert outcome["summary"] == "coverage gate refused: insufficient_data"
    assert "ranking_proposal not computed: coverage gate refused: insufficient_data" in _logged(instance, result)
    states = {c.name: c for c in latest_checks(instance, GATE_CHECKS, PARTITION)}
    assert not states["offline_gate_passed"].evaluated and states["offline_gate_passed"].run_id == result.run_id
    assert _refused(lab_url, instance) == "no candidate profile" and _no_profiles(lab_url)


def test_an_offline_no_improvement_ends_the_run_successfully_before_the_holdout(lab_url, instance):
    make_lab(lab_url, signal="mixed")
    result = run_lab(lab_url, instance)
    meta = _assert_expected_no(result, "offline_gate_passed", "full_retrieval_holdout")
    assert meta["decision"] == "no_improvement" and materialized(result) == {
        "feedback_snapshot",
        "query_split",
        "ranking_proposal",
    }
    outcome = run_outcome(instance, result.run_id)
    assert (outcome["outcome"], outcome["stopped_by"], outcome["decision"]) == (
        "expected_no",
        "offline_gate_passed",
        "no_improvement",
    )
    assert float(outcome["gain"]) == meta["validation_ndcg_gain"]
    assert (float(outcome["interval_low"]), float(outcome["interval_high"])) == (
        meta["interval_low"],
        meta["interval_high"],
    )
    assert outcome["needs"] == meta["needs"]
    assert outcome["needs"] == "no measurable gain" or outcome["needs"].startswith(("needs about", "enough"))
    # every threshold it was judged against, how it was fitted, and its power figures
    assert (meta["min_ndcg_gain"], meta["max_p_value"], meta["crossfit_folds"]) == (0.01, 0.025, 3)
    assert meta["proposal_check"] == "interval"  # what it asked of the proposal's own validation gain
    assert meta["gate"] == "validation and cross-fitted groups" and meta["evidence_groups"] > meta["validation_groups"]
    assert 0 < meta["sign_flip_p"] <= 1
    assert (meta["fit_path"], meta["family"], meta["algorithm"]) == (
        "pool",
        "multipliers_interactions_v2",
        "pool_ndcg_search_v2",
    )
    assert meta["alternative"] == "pool_pairwise_logistic_v2" and "observed_sd" in meta
    # the shrinkage rule's numbers: the grid, its inner folds, the factor they chose and each fold's
    grid, folds = [0.5, 0.75, 1.0], json.loads(meta["crossfit_shrinkage_factors"])
    assert (json.loads(meta["shrinkage_grid"]), meta["shrinkage_folds"]) == (grid, 3)
    assert meta["shrinkage_factor"] in grid and len(json.loads(meta["shrinkage_inner_ndcg"])) == len(grid)
    assert len(folds) == 3 and set(folds) <= set(grid)
    # the default's risk-averse choice: each factor's held-out harm beside its NDCG (RISK_DEFAULTS)
    harm = json.loads(meta["shrinkage_inner_harm"])
    assert meta["shrinkage_risk_aversion"] == 1.0 and len(harm) == len(grid)
    assert _no_profiles(lab_url) and isinstance(_refused(lab_url, instance), str)


@pytest.mark.parametrize("aversion", [1.0, 0.0])
def test_the_offline_check_shows_each_shrinkage_factors_inner_harm_and_the_choice_its_risk_aversion_makes(
    lab_url, instance, aversion
):
    """Risk-averse (the default's 1) or risk-neutral (0, the default before): the check shows the
    held-out NDCG and harm of every factor and the factor the risk-adjusted score picks."""
    make_lab(lab_url, signal="mixed")
    resources = {
        **lab_resources(lab_url),
        "learning_policy": LearningPolicyResource(**SMALL_LAB_POLICY, shrinkage_risk_aversion=aversion),
    }
    result = run_lab(lab_url, instance, resources=resources)
    assert result.success
    _, meta = check_evaluation(result, "offline_gate_passed")
    grid, harm = json.loads(meta["shrinkage_grid"]), json.loads(meta["shrinkage_inner_harm"])
    ndcg = json.loads(meta["shrinkage_inner_ndcg"])
    assert meta["shrinkage_risk_aversion"] == aversion and len(harm) == len(ndcg) == len(grid)
    assert all(h >= 0 for h in harm)
    # the factor the check shows is the one the risk-adjusted held-out score picks
    assert meta["shrinkage_factor"] == choose_factor(grid, ndcg, harm, aversion)


def test_a_holdout_no_improvement_ends_the_run_successfully_without_a_profile(lab_url, instance):
    make_lab(lab_url, holdout_truth="vague")
    result = run_lab(lab_url, instance)
    meta = _assert_expected_no(result, "holdout_gate_passed", "candidate_profile")
    assert check_evaluation(result, "holdout_memory_unchanged")[0].passed and meta["decision"] == "no_improvement"
    assert "candidate_profile" not in materialized(result) and _no_profiles(lab_url)
    outcome = run_outcome(instance, result.run_id)
    assert (outcome["outcome"], outcome["stopped_by"]) == ("expected_no", "holdout_gate_passed")
    assert float(outcome["gain"]) == meta["ndcg_gain"] and outcome["needs"] == meta["needs"]
    assert (meta["max_mean_harm"], meta["severe_loss"], meta["max_severe_share"], meta["max_p_value"]) == (
        0.02,
        0.5,
        0.05,
        0.025,
    )
    # the first look at this partition's holdout spends half of the 5% budget
    assert (meta["look"], meta["alpha_budget"], meta["look_alpha"]) == (1, 0.05, 0.025)
    assert {"harm", "benefit", "severe_share", "sign_flip_p", "observed_sd", "groups_for_power"} <= set(meta)
    assert _refused(lab_url, instance) == "no candidate profile"


def test_a_holdout_short_of_groups_says_how_many_more_holdout_queries_it_needs(lab_url, instance):
    make_lab(lab_url)
    short = {"ops": {"full_retrieval_holdout": {"config": {"min_query_groups": 100}}}}  # the lab registers 60
    result = run_lab(lab_url, instance, run_config=short)
    meta = _assert_expected_no(result, "holdout_gate_passed", "candidate_profile")
    more = 100 - meta["query_groups"]
    assert meta["decision"] == "insufficient_data" and meta["more_groups_needed"] == more
    assert meta["needs"] == f"needs about {more} more judged holdout queries"
    assert run_outcome(instance, result.run_id)["more_groups_needed"] == str(more) and _no_profiles(lab_url)


def test_no_registered_holdout_queries_is_an_expected_no(lab_url, instance):
    make_lab(lab_url, holdout=False)
    result = run_lab(lab_url, instance)
    _assert_expected_no(result, "holdout_gate_passed", "candidate_profile")
    memory, _ = check_evaluation(result, "holdout_memory_unchanged")
    assert not memory.passed and memory.severity == dg.AssetCheckSeverity.WARN
    outcome = run_outcome(instance, result.run_id)
    assert (outcome["stopped_by"], outcome["decision"]) == ("holdout_gate_passed", "no_holdout_queries")
    assert _no_profiles(lab_url) and _refused(lab_url, instance) == "no candidate profile"


def test_a_candidate_profile_materialized_alone_after_a_holdout_no_creates_nothing(lab_url, instance):
    make_lab(lab_url, holdout_truth="vague")
    assert run_lab(lab_url, instance).success
    alone = run_lab(lab_url, instance, assets=LEARNING_ASSETS, selection=["candidate_profile"])
    assert alone.success and materialized(alone) == set() and _no_profiles(lab_url)
    assert run_outcome(instance, alone.run_id)["stopped_by"] == "holdout_gate_passed"


def _assert_integrity_failure(result, gate, not_executed):
    assert not result.success
    evaluation, meta = check_evaluation(result, gate)
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert meta["outcome"] == "integrity_failure" and meta["reason"] == evaluation.description
    steps = _steps(result)
    assert steps[CHECK_STEPS[gate]] == "STEP_FAILURE" and all(s not in steps for s in not_executed), steps


def test_a_baseline_replay_mismatch_fails_the_run(lab_url, instance, monkeypatch):
    make_lab(lab_url)
    plant_replay_mismatches(monkeypatch)
    result = run_lab(lab_url, instance)
    _assert_integrity_failure(result, "baseline_replay_exact", STAGES[2:])
    assert materialized(result) == {"feedback_snapshot", "query_split"}
    outcome = run_outcome(instance, result.run_id)
    assert (outcome["outcome"], outcome["stopped_by"]) == ("integrity_failure", "baseline_replay_exact")
    assert "do not replay" in outcome["reason"]
    assert _refused(lab_url, instance) == "no candidate profile" and _no_profiles(lab_url)


def test_a_memory_change_during_the_holdout_fails_the_run(lab_url, instance, monkeypatch):
    make_lab(lab_url)
    write_during_holdout(monkeypatch, OWNER)
    result = run_lab(lab_url, instance)
    _assert_integrity_failure(result, "holdout_memory_unchanged", ("candidate_profile",))
    gate, _ = check_evaluation(result, "holdout_gate_passed")
    assert not gate.passed and gate.severity == dg.AssetCheckSeverity.ERROR  # no evaluation to judge
    assert run_outcome(instance, result.run_id)["outcome"] == "integrity_failure"
    assert _refused(lab_url, instance) == "no candidate profile" and _no_profiles(lab_url)


def test_a_passing_run_records_its_outcome_and_profile(lab_url, instance):
    make_lab(lab_url)
    result = run_lab(lab_url, instance)
    assert result.success and "candidate_profile" in materialized(result)
    outcome = run_outcome(instance, result.run_id)
    profile_id = (
        instance.get_latest_materialization_event(dg.AssetKey("candidate_profile"))
        .asset_materialization.metadata["profile_id"]
        .value
    )
    assert (outcome["outcome"], outcome["decision"], outcome["profile_id"]) == (
        "passed",
        "improved_full_retrieval",
        profile_id,
    )
    assert "stopped_by" not in outcome and float(outcome["interval_low"]) > 0
    assert outcome["summary"] == "improved_full_retrieval"
    tags = instance.get_run_by_id(result.run_id).tags
    assert {k for k in tags if k.startswith(PREFIX)} == {PREFIX + key for key in RUN_TAG_KEYS}
    assert tags[PREFIX + "gain"] == f"{float(outcome['gain']):+.3f}"
