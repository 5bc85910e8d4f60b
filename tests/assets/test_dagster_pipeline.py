"""The Dagster learning pipeline: real partitions materialized against temporary instances and
stores, asserting which gate stops each failing scenario and that activation is sensor-guarded."""

import uuid

import dagster as dg
import psycopg

import prme_assets.holdout as holdout_asset
from prme_assets.activation import (
    activate_profile_job,
    activation_request,
    deactivate_profile_job,
    rollback_profile_job,
)
from prme_assets.check_records import latest_checks
from prme_assets.checks import GATE_CHECKS
from prme_assets.definitions import build_definitions
from prme_assets.discovery import learning_target_discovery_sensor
from prme_assets.partitions import LEARNING_TARGETS, encode_target
from prme_assets.schedules import nightly_learning_schedule
from prme_core import MemoryClient
from tests.conftest import _postgres_dsn, _with_schema
from tests.dagster_jobs import lab_resources, multiprocess_learning_job
from tests.lab_runs import materialized, run_lab
from tests.learning_lab import (
    HOLDOUT_CONFIG,
    LEARNING_CONFIG,
    NOW,
    TOPICS,
    build_lab,
    feedback_question,
    make_lab,
    write_during_holdout,
)

OWNER, SCOPES = "alice", ("personal",)
PARTITION = encode_target(OWNER, SCOPES)


def _outcome(result):
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert all(e.partition == PARTITION for e in result.get_asset_check_evaluations())
    return checks, materialized(result)


def test_a_partition_with_real_signal_goes_all_the_way_to_an_applied_profile(lab_url, instance):
    make_lab(lab_url)
    result = run_lab(lab_url, instance)
    checks, materialized = _outcome(result)
    assert result.success and all(checks.values()) and set(checks) == {n for _, n in GATE_CHECKS}
    assert materialized == {
        "feedback_snapshot",
        "query_split",
        "ranking_proposal",
        "full_retrieval_holdout",
        "candidate_profile",
    }
    request = activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"])
    assert isinstance(request, dg.RunRequest) and request.tags == {"prme/activation_target": PARTITION}
    assert request.partition_key == PARTITION  # the activation run is a run of the partition
    first = activate_profile_job.execute_in_process(
        run_config=request.run_config,
        partition_key=request.partition_key,
        instance=instance,
        resources=lab_resources(lab_url),
    )
    assert first.success and instance.get_run_by_id(first.run_id).tags["dagster/partition"] == PARTITION
    with MemoryClient(lab_url) as client:
        history = client.ranking_profile_history(OWNER, SCOPES)
        response = client.retrieve("how much is the cat repair", owner=OWNER, scopes=list(SCOPES), reference_time=NOW)
    assert len(history) == 1 and response.metadata.ranking_profile_status == "applied"
    rerun = activate_profile_job.execute_in_process(
        run_config=request.run_config, instance=instance, resources=lab_resources(lab_url)
    )
    assert rerun.success
    meta = rerun.output_for_node("activate_profile_op")
    assert meta["change_id"] == str(history[0].change_id)
    with MemoryClient(lab_url) as client:
        assert len(client.ranking_profile_history(OWNER, SCOPES)) == 1  # the rerun was a no-op
    assert activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"]) == "already active"
    # a later night's proposal refused offline: the reason says the newest candidate serves already
    offline = next((asset, name) for asset, name in GATE_CHECKS if asset == "ranking_proposal")
    instance.report_runless_asset_event(
        dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey(offline[0]), check_name=offline[1], passed=False, partition=PARTITION
        )
    )
    assert activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"]) == (
        f"already active; no later proposal passed every gate (not passed: {offline[1]})"
    )


def _activation_metadata(result):
    outputs = [e for e in result.all_node_events if e.is_successful_output]
    return {k: v.value for k, v in outputs[0].step_output_data.metadata.items()}


def test_rerunning_the_activation_job_after_a_deactivation_activates_nothing_and_says_why(lab_url, instance):
    make_lab(lab_url)
    assert run_lab(lab_url, instance).success
    request = activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"])

    def run():
        return activate_profile_job.execute_in_process(
            run_config=request.run_config, instance=instance, resources=lab_resources(lab_url), raise_on_error=False
        )

    first = run()
    assert first.success and _activation_metadata(first)["outcome"] == "activated"
    profile_id = _activation_metadata(first)["profile_id"]
    rerun = _activation_metadata(run())
    assert (rerun["outcome"], rerun["no_op_rerun"], rerun["active_profile_id"]) == (
        "already_recorded",
        True,
        profile_id,
    )
    with MemoryClient(lab_url) as client:
        client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES)  # the operator's decision
    refused = run()
    assert not refused.success
    failure = refused.failure_data_for_node("activate_profile_op").user_failure_data
    assert "was replaced since: deactivate change" in failure.description
    assert "rollback_profile_job with profile_id" in failure.description
    with MemoryClient(lab_url) as client:
        assert client.get_active_ranking_profile(OWNER, SCOPES) is None
        assert [s.action for s in client.ranking_profile_history(OWNER, SCOPES)] == ["deactivate", "activate"]
        response = client.retrieve("how much is the cat repair", owner=OWNER, scopes=list(SCOPES), reference_time=NOW)
    assert response.metadata.ranking_profile_status == "none"
    reason = activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"])
    assert isinstance(reason, str) and "served before" in reason and "rollback_profile_job" in reason


def test_operator_jobs_rerun_with_their_change_id_change_nothing_and_say_so(lab_url, instance):
    make_lab(lab_url)
    assert run_lab(lab_url, instance).success
    request = activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"])
    activated = activate_profile_job.execute_in_process(
        run_config=request.run_config, instance=instance, resources=lab_resources(lab_url)
    )
    profile_id = _activation_metadata(activated)["profile_id"]

    def run(job, op, config):
        result = job.execute_in_process(
            run_config={"ops": {op: {"config": config}}},
            partition_key=PARTITION,  # the operator picks the partition; the config need not repeat it
            instance=instance,
            resources=lab_resources(lab_url),
        )
        assert instance.get_run_by_id(result.run_id).tags["dagster/partition"] == PARTITION
        return _activation_metadata(result)

    deactivation = {"change_id": str(uuid.uuid4())}
    first = run(deactivate_profile_job, "deactivate_profile_op", deactivation)
    assert (first["outcome"], first["no_op_rerun"]) == ("deactivated", False)
    assert (first["previous_profile_id"], first["active_profile_id"]) == (profile_id, "base scoring")
    again = run(deactivate_profile_job, "deactivate_profile_op", deactivation)
    assert (again["outcome"], again["no_op_rerun"], again["change_id"]) == (
        "already_recorded",
        True,
        first["change_id"],
    )

    rollback = {"profile_id": profile_id, "change_id": str(uuid.uuid4())}
    back = run(rollback_profile_job, "rollback_profile_op", rollback)
    assert (back["outcome"], back["active_profile_id"], back["previous_profile_id"]) == (
        "rolled_back",
        profile_id,
        "base scoring",
    )
    stale = run(deactivate_profile_job, "deactivate_profile_op", deactivation)  # the old deactivation, retried
    assert (stale["outcome"], stale["active_profile_id"]) == (
        "already_recorded",
        profile_id,
    )  # the pointer as it is now
    again = run(rollback_profile_job, "rollback_profile_op", rollback)
    assert (again["outcome"], again["change_id"]) == ("already_recorded", back["change_id"])
    with MemoryClient(lab_url) as client:
        actions = [s.action for s in client.ranking_profile_history(OWNER, SCOPES)]
        assert actions == ["rollback", "deactivate", "activate"]  # newest first, no duplicates
        assert client.get_active_ranking_profile(OWNER, SCOPES).profile_id == uuid.UUID(profile_id)


def test_insufficient_coverage_stops_at_the_coverage_gate(lab_url, instance):
    make_lab(lab_url, topics=tuple(TOPICS[:8]))
    checks, materialized = _outcome(run_lab(lab_url, instance))
    assert checks["coverage_sufficient"] is False and checks["baseline_replay_exact"] is True
    assert materialized == {"feedback_snapshot", "query_split"}
    assert activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"]) == "no candidate profile"


def test_a_failing_offline_gate_stops_before_the_holdout(lab_url, instance):
    make_lab(lab_url, signal="mixed")
    checks, materialized = _outcome(run_lab(lab_url, instance))
    assert checks["coverage_sufficient"] and checks["offline_gate_passed"] is False
    assert "full_retrieval_holdout" not in materialized and "candidate_profile" not in materialized
    assert isinstance(activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"]), str)


def test_a_failing_holdout_gate_stops_before_any_profile(lab_url, instance):
    make_lab(lab_url, holdout_truth="vague")
    checks, materialized = _outcome(run_lab(lab_url, instance))
    assert (
        checks["offline_gate_passed"] and checks["holdout_memory_unchanged"] and checks["holdout_gate_passed"] is False
    )
    assert "candidate_profile" not in materialized
    with MemoryClient(lab_url) as client:
        assert client.list_ranking_profiles(OWNER) == []
    assert isinstance(activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"]), str)


def test_a_memory_change_during_the_holdout_fails_the_memory_gate(lab_url, instance, monkeypatch):
    make_lab(lab_url)
    write_during_holdout(monkeypatch, OWNER)
    checks, materialized = _outcome(run_lab(lab_url, instance))
    assert checks["holdout_memory_unchanged"] is False and checks["holdout_gate_passed"] is False
    assert "candidate_profile" not in materialized


def test_a_stale_baseline_stops_at_the_evidence_check_and_is_never_activated(lab_url, instance, monkeypatch):
    make_lab(lab_url)
    original = holdout_asset.holdout_stage

    def holdout_then_someone_activates(client, proposal, config):
        outcome = original(client, proposal, config)
        other = client.create_ranking_profile(proposal, outcome.evaluation, owner=OWNER)
        client.activate_ranking_profile(other.profile_id, owner=OWNER)  # the pointer moves under the run
        return outcome

    monkeypatch.setattr(holdout_asset, "holdout_stage", holdout_then_someone_activates)
    checks, materialized = _outcome(run_lab(lab_url, instance))
    assert checks["holdout_gate_passed"] and checks["profile_evidence_bound"] is False
    assert "profile_evidence_bound" in activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"])


def test_the_sensor_refuses_a_profile_whose_baseline_went_stale_after_its_gates(lab_url, instance):
    make_lab(lab_url)
    assert run_lab(lab_url, instance).success
    with MemoryClient(lab_url) as client:
        proposal = client.evaluate_learning(OWNER, scopes=list(SCOPES), config=LEARNING_CONFIG)
        holdout = client.evaluate_holdout(proposal, config=HOLDOUT_CONFIG)
        other = client.create_ranking_profile(proposal, holdout, owner=OWNER)
        client.activate_ranking_profile(other.profile_id, owner=OWNER)
    reason = activation_request(instance, PARTITION, lab_resources(lab_url)["prme_store"])
    assert isinstance(reason, str) and reason.startswith("stale baseline")


def test_the_discovery_sensor_adds_keys_for_new_scope_sets_and_advances_its_cursor(lab_url):
    with MemoryClient(lab_url) as client:
        build_lab(client, topics=tuple(TOPICS[:3]), holdout=False)
        build_lab(client, owner="bob", scopes=("project",), topics=tuple(TOPICS[:2]), holdout=False)
    with dg.instance_for_test() as inst:
        store = lab_resources(lab_url)["prme_store"]
        with dg.build_sensor_context(instance=inst, resources={"prme_store": store}) as context:
            first = learning_target_discovery_sensor(context)
        keys = [k for r in first.dynamic_partitions_requests for k in r.partition_keys]
        assert sorted(keys) == ["alice::personal", "bob::project"]
        inst.add_dynamic_partitions(LEARNING_TARGETS.name, keys)
        with dg.build_sensor_context(instance=inst, cursor=first.cursor, resources={"prme_store": store}) as context:
            again = learning_target_discovery_sensor(context)
        assert not again.dynamic_partitions_requests and int(again.cursor) >= int(first.cursor)


def test_the_schedule_reruns_only_partitions_with_new_feedback(lab_url, instance):
    make_lab(lab_url, topics=tuple(TOPICS[:8]))
    store = lab_resources(lab_url)["prme_store"]
    # the resources go in the context, which is closed with what it opened: a resource keyword would
    # make the schedule build a second context that only the garbage collector closes, resetting
    # Dagster's current-instance state in whatever test runs then (a later Definitions load fails
    # with "Attempted to resolve undefined DagsterInstance weakref")
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=NOW, resources={"prme_store": store}
    ) as context:
        before = nightly_learning_schedule(context)
        assert [_batch(r) for r in before] == [[PARTITION]]
        run_lab(lab_url, instance)
        assert isinstance(nightly_learning_schedule(context), dg.SkipReason)
        with MemoryClient(lab_url) as client:
            r = client.retrieve(feedback_question("cat"), owner=OWNER, scopes=list(SCOPES), reference_time=NOW, limit=3)
            client.record_relevance(
                r.metadata.request_id, {r.results[0].node_id: True}, owner=OWNER, method="explicit_user"
            )
        after = nightly_learning_schedule(context)
    assert [_batch(r) for r in after] == [[PARTITION]] and after[0].run_key != before[0].run_key


def _batch(request: dg.RunRequest) -> list[str]:
    return request.run_config["ops"]["learn_partitions"]["config"]["partition_keys"]


def _multiprocess_run(url, monkeypatch):
    monkeypatch.setenv("PRME_STORE_URL", url)
    with MemoryClient(url) as client:
        build_lab(client)
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions(LEARNING_TARGETS.name, [PARTITION])
        inst.event_log_storage.set_concurrency_slots("prme_store", 1)  # as dagster.yaml's pool limit
        result = dg.execute_job(
            dg.reconstructable(multiprocess_learning_job), instance=inst, tags={"dagster/partition": PARTITION}
        )
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        passed = {c.name for c in latest_checks(inst, GATE_CHECKS, PARTITION) if c.passed}
        assert passed == {name for _, name in GATE_CHECKS}


def test_the_pipeline_runs_under_the_multiprocess_executor_on_a_duckdb_file(lab_url, monkeypatch):
    _multiprocess_run(lab_url, monkeypatch)


def test_the_pipeline_runs_under_the_multiprocess_executor_on_postgresql(monkeypatch):
    schema, dsn = f"t_{uuid.uuid4().hex[:16]}", _postgres_dsn()  # skips (or fails in CI) before the try
    try:
        _multiprocess_run(_with_schema(dsn, schema), monkeypatch)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_every_gate_is_a_blocking_partitioned_check_on_its_stage():
    defs = build_definitions()
    graph = defs.resolve_asset_graph()
    specs = {(key.asset_key.to_user_string(), key.name): graph.get_check_spec(key) for key in graph.asset_check_keys}
    assert set(specs) == set(GATE_CHECKS)
    assert all(spec.blocking for spec in specs.values())
    for asset in (
        "feedback_snapshot",
        "query_split",
        "ranking_proposal",
        "full_retrieval_holdout",
        "candidate_profile",
    ):
        assert graph.get(dg.AssetKey(asset)).partitions_def == LEARNING_TARGETS
