"""Scale-out on Celery: the batched learning op runs on ``dagster-celery``'s executor against the
local RabbitMQ, with two workers that each execute one of a run's two batches.

RabbitMQ comes from ``PRME_TEST_CELERY_BROKER`` (default: the local server, guest/guest). Outside
CI an unreachable broker skips this test; with ``CI=true`` it fails (``.ci/run`` starts it).
The Dagster instance and the domain store are on PostgreSQL (a database and a schema of their
own, dropped afterwards): the workers are other processes, as on other machines.
"""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from prme_assets.batching import batch_run_config
from prme_assets.check_records import latest_checks
from prme_assets.checks import GATE_CHECKS
from prme_assets.partitions import LEARNING_TARGETS, encode_target
from prme_assets.resources import CELERY_BROKER_ENV
from prme_core import MemoryClient
from tests.conftest import IN_CI, POSTGRES_ENV, _postgres_dsn, _with_schema
from tests.dagster_jobs import CELERY_QUEUE_ENV, celery_batch_job
from tests.learning_lab import TOPICS, build_lab

ROOT = Path(__file__).resolve().parents[2]
BROKER_ENV = "PRME_TEST_CELERY_BROKER"
DEFAULT_BROKER = "pyamqp://guest:guest@127.0.0.1:5672//"
WORKER_READY_SECONDS = 90


def _broker() -> str:
    url = os.environ.get(BROKER_ENV) or DEFAULT_BROKER
    from kombu import Connection

    try:
        with Connection(url, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:  # noqa: BLE001 - any connection failure means the same thing here
        if IN_CI:
            pytest.fail(f"RabbitMQ at {url} is unreachable under CI (.ci/run starts it): {exc}")
        pytest.skip(f"RabbitMQ at {url} is unreachable: {exc}")
    return url


def _start_worker(name: str, queue: str, broker: str, env: dict, log: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", "celery", "-A", "dagster_celery.app", "-b", broker, "--result-backend", "rpc://"]
    args += ["worker", "-Q", queue, "-n", f"{name}@%h", "-c", "1", "--prefetch-multiplier=1", "-l", "INFO"]
    args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _wait_ready(logs: list[Path], workers: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + WORKER_READY_SECONDS
    while time.monotonic() < deadline:
        if any(w.poll() is not None for w in workers):
            break
        if all(" ready." in log.read_text() for log in logs):
            return
        time.sleep(0.5)
    raise AssertionError("celery workers did not start:\n" + "\n".join(log.read_text()[-2000:] for log in logs))


@pytest.mark.filterwarnings("ignore:Task name 'execute_plan' is already registered")  # dagster-celery's own
def test_the_batched_learning_op_runs_on_celery_with_two_workers(tmp_path, monkeypatch):
    broker = _broker()
    dsn = _postgres_dsn()
    suffix = uuid.uuid4().hex[:12]
    database, schema, queue = f"prme_celery_{suffix}", f"t_{suffix}", f"prme_test_{suffix}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    store_url = _with_schema(dsn, schema)
    instance_url = psycopg.conninfo.make_conninfo(dsn, dbname=database)
    env = {**os.environ, "PRME_STORE_URL": store_url, CELERY_QUEUE_ENV: queue, CELERY_BROKER_ENV: broker}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    for key in ("PRME_STORE_URL", CELERY_QUEUE_ENV, CELERY_BROKER_ENV):
        monkeypatch.setenv(key, env[key])
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [_start_worker(n, queue, broker, env, log) for n, log in zip(("w1", "w2"), logs)]
    try:
        with MemoryClient(store_url) as client:
            for owner in ("ann", "cyd"):
                build_lab(client, owner=owner, topics=tuple(TOPICS[:30]))
            for owner in ("ben", "dee"):
                build_lab(client, owner=owner, topics=tuple(TOPICS[:3]))
        batch_a, batch_b = (
            [encode_target(o, ("personal",)) for o in pair] for pair in (("ann", "ben"), ("cyd", "dee"))
        )
        overrides = {"storage": {"postgres": {"postgres_url": _sqlalchemy_url(instance_url)}}}
        _wait_ready(logs, workers)
        with dg.instance_for_test(overrides=overrides) as instance:
            instance.add_dynamic_partitions(LEARNING_TARGETS.name, batch_a + batch_b)
            run_config = {"ops": {**_ops("batch_a", batch_a), **_ops("batch_b", batch_b)}}
            result = dg.execute_job(dg.reconstructable(celery_batch_job), instance=instance, run_config=run_config)
            assert result.success, [e.message for e in result.all_events if e.is_failure]
            by_step = {
                e.step_key: e.event_specific_data.metadata["Celery worker"].value
                for e in instance.all_logs(result.run_id)
                if e.dagster_event is not None and e.dagster_event.is_engine_event and e.dagster_event.step_key
                for e in [e.dagster_event]
                if "Celery worker" in (e.event_specific_data.metadata if e.event_specific_data else {})
            }
            assert set(by_step) == {"batch_a", "batch_b"}
            assert {w.split("@")[0] for w in by_step.values()} == {"w1", "w2"}  # one batch on each worker
            gates = {name for _, name in GATE_CHECKS}
            for passing, short in (batch_a, batch_b):
                assert {c.name for c in latest_checks(instance, GATE_CHECKS, passing) if c.passed} == gates
                assert {c.name: c.passed for c in latest_checks(instance, GATE_CHECKS, short) if c.evaluated} == {
                    "coverage_sufficient": False,
                    "baseline_replay_exact": True,
                }
            snapshots = instance.fetch_materializations(dg.AssetKey("feedback_snapshot"), limit=100).records
            assert sorted(r.partition_key for r in snapshots) == sorted(batch_a + batch_b)  # each exactly once
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
        _delete_queue(broker, queue)
        with psycopg.connect(os.environ[POSTGRES_ENV], autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _ops(name: str, keys: list[str]) -> dict:
    return {name: batch_run_config(keys)["ops"]["learn_partitions"]}


def _sqlalchemy_url(conninfo: str) -> str:
    """A libpq connection string as the psycopg2 URL dagster-postgres expects."""
    parts = psycopg.conninfo.conninfo_to_dict(conninfo)
    auth = parts.get("user", "postgres") + (f":{parts['password']}" if parts.get("password") else "")
    return f"postgresql+psycopg2://{auth}@{parts.get('host', '127.0.0.1')}:{parts.get('port', 5432)}/{parts['dbname']}"


def _delete_queue(broker: str, queue: str) -> None:
    from kombu import Connection

    with Connection(broker, connect_timeout=5) as conn:
        conn.default_channel.queue_delete(queue)
