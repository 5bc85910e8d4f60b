"""How the production code location runs: the executor and the schedule's cron and batch size from
the environment, and the Kubernetes values agreeing with the instance configuration."""

from pathlib import Path

import pytest
import yaml

from prme_assets.definitions import build_definitions
from prme_assets.executors import celery_config
from prme_assets.resources import Orchestration, orchestration_from_env
from prme_core.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = (
    "PRME_EXECUTOR",
    "PRME_CELERY_BROKER",
    "PRME_CELERY_BACKEND",
    "PRME_LEARNING_CRON",
    "PRME_LEARNING_BATCH_SIZE",
)


@pytest.fixture
def clean_env(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_unset_variables_mean_multiprocess_nightly_batches_of_fifty(clean_env):
    assert orchestration_from_env() == Orchestration()
    defs = build_definitions(orchestration=orchestration_from_env())
    assert defs.resolve_job_def("prme_learning_batch_job").executor_def.name == "prme_multiprocess"
    schedule = defs.resolve_schedule_def("nightly_learning_schedule")  # beside the retention schedule
    assert schedule.cron_schedule == "0 3 * * *" and "50 per run" in schedule.description


def test_celery_reads_the_broker_from_its_variable_at_launch_never_from_run_config(clean_env):
    clean_env.setenv("PRME_EXECUTOR", "celery")
    clean_env.setenv("PRME_CELERY_BROKER", "pyamqp://user:secret@rabbit:5672//")
    clean_env.setenv("PRME_LEARNING_CRON", "*/5 * * * *")
    clean_env.setenv("PRME_LEARNING_BATCH_SIZE", "200")
    defs = build_definitions(orchestration=orchestration_from_env())
    executor = defs.resolve_job_def("prme_learning_batch_job").executor_def
    assert executor.name == "prme_celery"
    assert executor.apply_config_mapping({}).value["config"]["broker"] == "pyamqp://user:secret@rabbit:5672//"
    config = celery_config(orchestration_from_env())  # what the definition holds: the variable's name
    assert config == {"broker": {"env": "PRME_CELERY_BROKER"}, "backend": "rpc://"}
    schedule = defs.resolve_schedule_def("nightly_learning_schedule")  # beside the retention schedule
    assert schedule.cron_schedule == "*/5 * * * *" and "200 per run" in schedule.description


@pytest.mark.parametrize(
    ("name", "value"),
    [("PRME_EXECUTOR", "threads"), ("PRME_LEARNING_BATCH_SIZE", "fifty"), ("PRME_LEARNING_BATCH_SIZE", "0")],
)
def test_a_bad_orchestration_variable_is_refused_naming_it(clean_env, name, value):
    clean_env.setenv(name, value)
    with pytest.raises(
        (InvalidInput, ValueError), match=name if name == "PRME_EXECUTOR" or value == "fifty" else "batch_size"
    ):
        orchestration_from_env()


def test_the_kubernetes_values_serve_the_production_location_with_the_instance_tag_limits():
    values = yaml.safe_load((ROOT / "deploy" / "k8s" / "values.yaml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    args = deployment["dagsterApiGrpcArgs"]
    assert args[args.index("--module-name") + 1] == "prme_assets.definitions"
    assert values["runLauncher"]["type"] == "K8sRunLauncher" and values["postgresql"]["enabled"] is False
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    instance = yaml.safe_load((ROOT / "deploy" / "dagster.postgres.yaml").read_text())
    assert queued["tagConcurrencyLimits"] == instance["concurrency"]["runs"]["tag_concurrency_limits"]


def test_the_activation_sensor_examines_a_bounded_window_of_partitions_and_takes_turns(tmp_path, monkeypatch):
    import dagster as dg

    import prme_assets.activation as activation
    from prme_assets.partitions import LEARNING_TARGETS
    from prme_assets.resources import PrmeStoreResource

    monkeypatch.setattr(activation, "ACTIVATION_TICK_LIMIT", 2)
    keys = ["ann::personal", "ben::personal", "cyd::personal"]
    store = PrmeStoreResource(store_url=f"duckdb:///{tmp_path / 'store.duckdb'}")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(LEARNING_TARGETS.name, keys)
        seen = []
        cursor = None
        for _ in range(2):
            with dg.build_sensor_context(instance=instance, cursor=cursor, resources={"prme_store": store}) as context:
                tick = activation.profile_activation_sensor.evaluate_tick(context)
            seen.append([part.split(":")[0] for part in tick.skip_message.split("; ")])
            cursor = tick.cursor
    assert seen == [["ann", "ben"], ["cyd", "ann"]]  # every partition within ceil(3 / 2) ticks
