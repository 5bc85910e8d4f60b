"""Batched learning (``prme_assets.batching``): one run learns several partitions, and each
partition's gates decide for that partition only, as strictly as a run of its own."""

import dagster as dg

from prme_assets.activation import activation_request
from prme_assets.batching import BATCH_JOB, batch_run_config, learning_batch_job
from prme_assets.check_records import latest_checks
from prme_assets.checks import GATE_CHECKS, GATES
from prme_assets.definitions import LEARNING_ASSETS
from prme_assets.gate_table import GATES_BY_NAME
from prme_assets.partitions import LEARNING_TARGETS, encode_target
from prme_assets.schedules import learning_requests
from prme_core import MemoryClient
from tests.dagster_jobs import lab_resources
from tests.learning_lab import TOPICS, build_lab, feedback_question, write_during_holdout

SCOPES = ("personal",)
PASSING, SHORT, MISLEADING, CHANGED = (encode_target(o, SCOPES) for o in ("ann", "ben", "cyd", "dee"))
GATE_NAMES = {name for _, name in GATE_CHECKS}


def _lab(url):
    """Four owners: real signal (passes every gate), three topics (coverage says no), a holdout
    that disagrees with the feedback (holdout gate says no), and one whose memory will change in
    the middle of its holdout (an integrity failure)."""
    with MemoryClient(url) as client:
        build_lab(client, owner="ann", topics=tuple(TOPICS[:30]))
        build_lab(client, owner="ben", topics=tuple(TOPICS[:3]))
        build_lab(client, owner="cyd", topics=tuple(TOPICS[:30]), holdout_truth="vague")
        build_lab(client, owner="dee", topics=tuple(TOPICS[:30]))


def _checks(instance, partition) -> dict[str, bool]:
    return {c.name: c.passed for c in latest_checks(instance, GATE_CHECKS, partition) if c.evaluated}


def _materialized(result, partition) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events() if e.partition == partition}


def test_one_batched_run_gates_each_partition_on_its_own(lab_url, instance, monkeypatch):
    _lab(lab_url)
    keys = [CHANGED, PASSING, SHORT, MISLEADING]  # the write lands in the first partition's holdout
    instance.add_dynamic_partitions(LEARNING_TARGETS.name, keys)
    write_during_holdout(monkeypatch, "dee")
    result = learning_batch_job.execute_in_process(
        run_config=batch_run_config(keys), instance=instance, resources=lab_resources(lab_url), raise_on_error=False
    )
    # the integrity failure of one partition fails the run, after the others were learned
    assert not result.success
    failure = result.failure_data_for_node("learn_partitions").user_failure_data
    assert failure.description.startswith("1 of 4 partitions failed") and CHANGED in failure.description
    assert all(e.partition in keys for e in result.get_asset_check_evaluations())

    assert _checks(instance, PASSING) == dict.fromkeys(GATE_NAMES, True)
    assert "candidate_profile" in _materialized(result, PASSING)
    assert isinstance(activation_request(instance, PASSING, lab_resources(lab_url)["prme_store"]), dg.RunRequest)

    assert _checks(instance, SHORT) == {"coverage_sufficient": False, "baseline_replay_exact": True}
    assert _materialized(result, SHORT) == {"feedback_snapshot", "query_split"}
    severities = {e.check_name: e.severity for e in result.get_asset_check_evaluations() if e.partition == SHORT}
    assert severities["coverage_sufficient"] == dg.AssetCheckSeverity.WARN  # an expected "no"

    assert _checks(instance, MISLEADING)["holdout_gate_passed"] is False
    assert "candidate_profile" not in _materialized(result, MISLEADING)

    changed = {e.check_name: e for e in result.get_asset_check_evaluations() if e.partition == CHANGED}
    assert not changed["holdout_memory_unchanged"].passed
    assert changed["holdout_memory_unchanged"].severity == dg.AssetCheckSeverity.ERROR
    assert "candidate_profile" not in _materialized(result, CHANGED)
    for partition in (SHORT, MISLEADING, CHANGED):
        assert isinstance(activation_request(instance, partition, lab_resources(lab_url)["prme_store"]), str)

    run = instance.get_run_by_id(result.run_id)
    assert run.tags["prme/batch_outcome"] == "1 passed, 2 expected_no, 1 integrity_failure"
    assert run.tags["prme/batch_partitions"] == "4"
    assert {k for k in run.tags if k.startswith("prme/")} == {
        "prme/kind",
        "prme/batch_partitions",
        "prme/batch_outcome",
    }
    summary = result.failure_data_for_node("learn_partitions").user_failure_data.metadata
    assert summary["integrity_failure"].value == 1 and summary["expected_no"].value == 2
    table = summary["outcomes"].value
    assert "| ben::personal | expected_no | coverage gate refused: insufficient_data |" in table
    assert "| dee::personal | integrity_failure | holdout gate failed: memory_changed |" in table
    assert "_passed" not in table  # refusals are named by what decided, not by the check's name


def _decision(materialization) -> tuple:
    """What a profile was learned from and what it changes (its id also covers the holdout's fresh
    receipts, which differ between any two holdout runs)."""
    meta = {k: v.value for k, v in materialization.metadata.items()}
    return (meta["proposal_input_checksum"], meta["multipliers"], meta["offline_gain"], meta["holdout_gain"])


def test_a_batched_partition_decides_as_a_run_of_its_own(lab_url, instance):
    with MemoryClient(lab_url) as client:
        build_lab(client, owner="ann", topics=tuple(TOPICS[:30]))
        build_lab(client, owner="ben", topics=tuple(TOPICS[:3]))
    keys = [PASSING, SHORT]
    instance.add_dynamic_partitions(LEARNING_TARGETS.name, keys)
    batch = learning_batch_job.execute_in_process(
        run_config=batch_run_config(keys), instance=instance, resources=lab_resources(lab_url)
    )
    assert batch.success
    batched = {
        e.partition: _decision(e.materialization)
        for e in batch.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("candidate_profile")
    }
    with dg.instance_for_test() as alone:
        alone.add_dynamic_partitions(LEARNING_TARGETS.name, keys)
        for key in keys:
            single = dg.materialize(
                [*LEARNING_ASSETS, *GATES],
                partition_key=key,
                instance=alone,
                resources=lab_resources(lab_url),
                raise_on_error=False,
            )
            assert single.success and _checks(alone, key) == _checks(instance, key)
            profile = single.asset_materializations_for_node("candidate_profile")
            assert [_decision(m) for m in profile] == ([batched[key]] if key in batched else [])
    assert list(batched) == [PASSING]


def test_a_batch_refuses_unknown_and_repeated_partitions_before_any_work(lab_url, instance):
    for keys in ([PASSING, PASSING], ["zed::personal"]):
        result = learning_batch_job.execute_in_process(
            run_config=batch_run_config(keys), instance=instance, resources=lab_resources(lab_url), raise_on_error=False
        )
        assert not result.success and not result.get_asset_materialization_events()


def test_every_gate_has_its_batched_verdict():
    assert set(GATES_BY_NAME) == GATE_NAMES


def test_the_schedule_requests_batches_and_skips_partitions_a_run_already_holds(lab_url):
    with dg.instance_for_test() as instance:
        _schedule_scenario(lab_url, instance)


def _schedule_scenario(lab_url, instance):
    owners = ["ann", "ben", "cyd"]
    with MemoryClient(lab_url) as client:
        for owner in owners:
            build_lab(client, owner=owner, topics=tuple(TOPICS[:2]), holdout=False)
    keys = [encode_target(o, SCOPES) for o in owners]
    instance.add_dynamic_partitions(LEARNING_TARGETS.name, keys)
    store = lab_resources(lab_url)["prme_store"]
    first = learning_requests(instance, store, batch_size=2, tick="t1")
    assert [r.run_config["ops"]["learn_partitions"]["config"]["partition_keys"] for r in first] == [keys[:2], keys[2:]]
    assert len({r.run_key for r in first}) == 2 and all(r.run_key.startswith("learn-batch:t1:") for r in first)
    instance.create_run_for_job(
        learning_batch_job, run_config=first[0].run_config, status=dg.DagsterRunStatus.STARTED
    )  # running, its partitions not learned yet
    again = learning_requests(instance, store, batch_size=2, tick="t2")
    assert [r.run_config["ops"]["learn_partitions"]["config"]["partition_keys"] for r in again] == [keys[2:]]
    assert again[0].tags["prme/batch_size"] == "1" and instance.get_runs()[0].job_name == BATCH_JOB
    with MemoryClient(lab_url) as client:  # new feedback changes the fingerprint, so the run key
        r = client.retrieve(feedback_question("cat"), owner="cyd", scopes=list(SCOPES), limit=3)
        client.record_relevance(
            r.metadata.request_id, {r.results[0].node_id: True}, owner="cyd", method="explicit_user"
        )
    assert learning_requests(instance, store, batch_size=2, tick="t2")[0].run_key != again[0].run_key
