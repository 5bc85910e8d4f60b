"""What the Dagster UI shows at a glance, read back from a real instance: an expected "no" is a
WARN check and an integrity failure an ERROR; a learning run carries three short ``prme/`` tags
(the detail is in an observation and the checks' metadata); a refusal is named by what decided,
not by its check's name; the activation, deactivation and rollback runs are runs of their
partition and report ``active_ranking_profile``; a profile's checks still read as passed after a
later run declined before re-checking it; evidence ids are links."""

import re

import dagster as dg
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionResolvedStatus as Resolved

from prme_assets.activation import (
    ACTIVE_PROFILE,
    activate_profile_job,
    activation_request,
    deactivate_profile_job,
    rollback_profile_job,
)
from prme_assets.check_records import latest_checks
from prme_assets.checks import GATE_CHECKS
from prme_assets.definitions import build_definitions
from prme_assets.outcome import run_outcome
from prme_assets.partitions import LEARNING_TARGETS, encode_target
from prme_assets.resources import API_URL_ENV
from tests.dagster_jobs import lab_resources
from tests.lab_runs import check_evaluation, plant_replay_mismatches, run_lab
from tests.learning_lab import make_lab

PARTITION = encode_target("alice", ("personal",))
API = "http://prme.test:8080"
PROFILE_CHECKS = [(asset, name) for asset, name in GATE_CHECKS if asset == "candidate_profile"]
LONG_FLOAT = re.compile(r"\d\.\d{4,}")


def _prme_tags(instance, run_id) -> dict[str, str]:
    return {k: v for k, v in instance.get_run_by_id(run_id).tags.items() if k.startswith("prme/")}


def _events(instance, asset, event_type):
    records = instance.fetch_materializations if event_type == "materialization" else instance.fetch_observations
    found = records(dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[PARTITION]), limit=20)
    return [r.event_log_entry for r in found.records]  # newest first


def _meta(event):
    return dict((event.asset_materialization or event.asset_observation).metadata)


def _value(event, key):
    return _meta(event)[key].value


def test_an_offline_no_is_a_warning_with_three_short_run_tags_and_a_refusal_named_by_what_decided(lab_url, instance):
    make_lab(lab_url, signal="mixed")
    result = run_lab(lab_url, instance)
    assert result.success
    evaluation, check = check_evaluation(result, "offline_gate_passed")
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN  # a warning, not an error
    assert check["summary"] == "offline gate refused: no_improvement"

    run = instance.get_run_by_id(result.run_id)
    tags = _prme_tags(instance, result.run_id)
    assert set(tags) == {"prme/outcome", "prme/decision", "prme/gain"}
    assert (tags["prme/outcome"], tags["prme/decision"]) == ("expected_no", "offline gate refused: no_improvement")
    assert re.fullmatch(r"[+-]\d+\.\d{3}", tags["prme/gain"])
    assert float(tags["prme/gain"]) == round(check["validation_ndcg_gain"], 3)
    assert run.tags["dagster/partition"] == PARTITION and len(run.tags) <= 6
    assert not any(LONG_FLOAT.search(v) for v in run.tags.values()), run.tags

    # the detail, at full precision, is on an observation of the stage that declined
    (observation,) = _events(instance, "full_retrieval_holdout", "observation")
    assert observation.run_id == result.run_id and observation.asset_observation.partition == PARTITION
    assert observation.asset_observation.description == "offline gate refused: no_improvement"
    assert _value(observation, "gate_check") == "offline_gate_passed"
    assert _value(observation, "gain") == check["validation_ndcg_gain"]
    assert _value(observation, "needs") == check["needs"]
    outcome = run_outcome(instance, result.run_id)
    assert (outcome["summary"], outcome["stopped_by"]) == (
        "offline gate refused: no_improvement",
        "offline_gate_passed",
    )
    logged = "\n".join(e.user_message for e in instance.all_logs(result.run_id))
    assert "full_retrieval_holdout not computed: offline gate refused: no_improvement" in logged


def test_an_integrity_failure_is_an_error_named_by_the_check_that_failed(lab_url, instance, monkeypatch):
    make_lab(lab_url)
    plant_replay_mismatches(monkeypatch)
    result = run_lab(lab_url, instance)
    assert not result.success
    evaluation, check = check_evaluation(result, "baseline_replay_exact")
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert check["summary"] == "baseline replay check failed"
    tags = _prme_tags(instance, result.run_id)
    assert tags == {
        "prme/outcome": "integrity_failure",
        "prme/decision": "baseline replay check failed",
        "prme/gain": "",
    }
    (observation,) = _events(instance, "query_split", "observation")
    assert _value(observation, "gate_check") == "baseline_replay_exact"


def _statuses(instance, asset, check) -> dict[Resolved, set[str]]:
    """The partitions under each status the UI paints for one check (its partition statuses)."""
    key = dg.AssetCheckKey(dg.AssetKey(asset), check)
    with partition_loading_context(dynamic_partitions_store=instance):
        state = instance.event_log_storage.get_asset_check_state([(key, LEARNING_TARGETS)])[key]
    return {s: set(state.subsets[s].subset_value.get_partition_keys()) for s in state.subsets}


def test_the_pointer_jobs_run_for_their_partition_and_report_the_active_profile(lab_url, instance, monkeypatch):
    monkeypatch.setenv(API_URL_ENV, API)
    make_lab(lab_url)
    learned = run_lab(lab_url, instance)
    assert learned.success
    (created,) = _events(instance, "candidate_profile", "materialization")
    profile_id = _value(created, "profile_id")
    assert _meta(created)["profile"] == dg.MetadataValue.url(f"{API}/v1/profiles/{profile_id}")
    assert _meta(created)["baseline_profile"] == dg.MetadataValue.text("base scoring")
    assert _meta(created)["proposal"] == dg.MetadataValue.asset(dg.AssetKey("ranking_proposal"))
    assert _meta(created)["holdout"] == dg.MetadataValue.asset(dg.AssetKey("full_retrieval_holdout"))
    assert _prme_tags(instance, learned.run_id)["prme/decision"] == "improved_full_retrieval"

    request = activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"])
    assert isinstance(request, dg.RunRequest) and request.partition_key == PARTITION
    launched = request.with_resolved_tags_and_config(  # what the sensor daemon launches
        target_definition=activate_profile_job, dynamic_partitions_requests=[], dynamic_partitions_store=instance
    )
    assert launched.tags["dagster/partition"] == PARTITION

    def pointer_run(job, config):
        result = job.execute_in_process(
            run_config=config, partition_key=PARTITION, instance=instance, resources=lab_resources(lab_url)
        )
        assert result.success and instance.get_run_by_id(result.run_id).tags["dagster/partition"] == PARTITION
        return result

    activated = pointer_run(activate_profile_job, request.run_config)
    (change,) = _events(instance, ACTIVE_PROFILE, "materialization")
    assert change.run_id == activated.run_id and change.asset_materialization.partition == PARTITION
    assert (_value(change, "action"), _value(change, "active_profile_id"), _value(change, "previous_profile_id")) == (
        "activate",
        profile_id,
        "base scoring",
    )
    assert _value(change, "pointer_version") == 1
    assert _meta(change)["active_profile"] == dg.MetadataValue.url(f"{API}/v1/profiles/{profile_id}")
    assert _meta(change)["learned_in_run"] == dg.MetadataValue.dagster_run(learned.run_id)
    assert _value(change, "holdout_gain") == _value(created, "holdout_gain")
    assert _value(change, "proposal_input_checksum") == _value(created, "proposal_input_checksum")

    pointer_run(activate_profile_job, request.run_config)  # a rerun changes nothing and says so
    assert len(_events(instance, ACTIVE_PROFILE, "materialization")) == 1
    (rerun,) = _events(instance, ACTIVE_PROFILE, "observation")
    assert _value(rerun, "no_op_rerun") is True and _value(rerun, "active_profile_id") == profile_id

    # learning again: the holdout now runs against the active profile and finds no improvement;
    # the profile the partition holds keeps the checks it passed instead of reading "Skipped"
    again = run_lab(lab_url, instance)
    assert again.success and run_outcome(instance, again.run_id)["summary"] == "holdout gate refused: no_improvement"
    for asset, name in PROFILE_CHECKS:
        statuses = _statuses(instance, asset, name)
        assert PARTITION in statuses[Resolved.SUCCEEDED] and PARTITION not in statuses[Resolved.SKIPPED], statuses
        (state,) = [c for c in latest_checks(instance, [(asset, name)], PARTITION)]
        assert state.passed and state.run_id == again.run_id
        (restated,) = [e for e in again.get_asset_check_evaluations() if e.check_name == name]
        assert restated.metadata["evaluated_in_run"] == dg.MetadataValue.dagster_run(learned.run_id)
        assert restated.metadata["restated_because"].value == "holdout gate refused: no_improvement"
        assert restated.target_materialization_data.run_id == learned.run_id

    pointer_run(deactivate_profile_job, {"ops": {"deactivate_profile_op": {"config": {}}}})
    deactivated = _events(instance, ACTIVE_PROFILE, "materialization")[0]
    assert (_value(deactivated, "action"), _value(deactivated, "active_profile_id")) == ("deactivate", "base scoring")
    assert _meta(deactivated)["previous_profile"] == dg.MetadataValue.url(f"{API}/v1/profiles/{profile_id}")
    assert _value(deactivated, "pointer_version") == 2

    rollback = {"ops": {"rollback_profile_op": {"config": {"profile_id": profile_id}}}}
    pointer_run(rollback_profile_job, rollback)
    back = _events(instance, ACTIVE_PROFILE, "materialization")[0]
    assert (_value(back, "action"), _value(back, "active_profile_id")) == ("rollback", profile_id)
    assert _value(back, "pointer_version") == 3

    other = {"ops": {"deactivate_profile_op": {"config": {"partition_key": "bob::personal"}}}}
    refused = deactivate_profile_job.execute_in_process(
        run_config=other,
        partition_key=PARTITION,
        instance=instance,
        resources=lab_resources(lab_url),
        raise_on_error=False,
    )
    assert not refused.success
    assert (
        "its config names 'bob::personal'"
        in refused.failure_data_for_node("deactivate_profile_op").user_failure_data.description
    )


def test_the_active_profile_is_a_partitioned_asset_downstream_of_the_candidate_profile():
    graph = build_definitions().resolve_asset_graph()
    node = graph.get(dg.AssetKey(ACTIVE_PROFILE))
    assert node.partitions_def == LEARNING_TARGETS and node.group_name == "prme_learning"
    assert node.parent_keys == {dg.AssetKey("candidate_profile")} and not node.is_executable
    for job in (activate_profile_job, deactivate_profile_job, rollback_profile_job):
        assert job.partitions_def == LEARNING_TARGETS
