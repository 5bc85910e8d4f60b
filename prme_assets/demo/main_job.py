"""The project's main job: the whole learning loop, in process, on the local instance (no
server): load memories, judge real retrievals, register holdout questions (the generated sample's
job, or the LoCoMo demo location's job for a LoCoMo file), discover partitions, materialize every partition with its gates, let the
activation sensor decide, run the activations it requested (the production location's jobs),
and print each partition's outcome.

A gate that says "no" is an outcome (the table says what it decided and what would change it);
a run that could not do its job (an error, a locked or unreachable store) fails the command
with ``LearningRunsFailed``, naming the partitions. Every run carries the command's
``StopSignals`` tags, so Ctrl-C cancels the run in flight and stops before the next one.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from prme_assets.activation import activation_request
from prme_assets.definitions import build_definitions
from prme_assets.demo.definitions import build_demo_definitions
from prme_assets.demo.outcome_table import (
    KEPT_ACTIVE,
    PartitionResult,
    read_outcome,
    render_table,
    run_error,
)
from prme_assets.demo.progress import Progress, reporting
from prme_assets.demo.sample import build_sample_definitions
from prme_assets.discovery import learning_target_discovery_sensor
from prme_assets.evidence_io import evidence_io_from_env
from prme_assets.interrupts import StopSignals
from prme_assets.partitions import LEARNING_TARGETS, decode_target
from prme_assets.resources import LearningPolicyResource, store_resource_from_env
from prme_core.errors import PrmeError

QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
"""Runs log to the instance (the UI shows everything); the command prints its own summary."""


class DataJobFailed(PrmeError):
    """The data job (memories, feedback, holdout questions) could not finish; nothing was learned."""


class LearningRunsFailed(PrmeError):
    """At least one partition's learning run could not do its job (not a gate saying no)."""

    def __init__(self, failed: list[PartitionResult]) -> None:
        self.failed = failed
        first = failed[0]
        more = f" (and {len(failed) - 1} more: {', '.join(r.partition for r in failed[1:])})" if len(failed) > 1 else ""
        super().__init__(
            f"learning {first.partition} failed: {first.failure()}{more}; the table above shows every "
            "partition, the Dagster UI the runs"
        )


@dataclass(frozen=True)
class MainRun:
    results: list[PartitionResult]


def run_main(
    *,
    data_path: Path | None,
    conversations: list[str] | None,
    say: Callable[[str], None],
    policy: LearningPolicyResource | None = None,
    stop: StopSignals | None = None,
    progress: Progress | None = None,
) -> MainRun:
    """Run the loop, print the outcome table; raise ``LearningRunsFailed`` if any run failed.

    ``data_path``: the LoCoMo file, already checked by the caller (``prme main --data``), or
    None for the generated sample. ``progress``: bars on stderr for the long steps (default none).
    """
    if stop is None:
        with StopSignals() as own:
            return run_main(
                data_path=data_path,
                conversations=conversations,
                say=say,
                policy=policy,
                stop=own,
                progress=progress,
            )
    progress = progress or Progress(False)
    with progress, reporting(progress):
        results = _run(data_path, conversations, lambda line: progress.say(line) or say(line), policy, stop, progress)
    print(render_table(results))
    failed = [r for r in results if r.failed]
    if failed:
        raise LearningRunsFailed(failed)
    return MainRun(results)


def _data_job(data_path: Path | None, conversations: list[str] | None, store) -> tuple[dg.JobDefinition, dict, str]:
    """The job that loads the data, its run config and what the step line calls the data."""
    if data_path is None:
        job = build_sample_definitions({"prme_store": store}).resolve_job_def("sample_demo_job")
        return job, {}, "the generated sample (prme_core.datasets.sample)"
    demo_defs = build_demo_definitions({"prme_store": store})
    config = {"data_path": str(data_path), "conversations": conversations or []}
    ops = {"locomo_memories": {"config": config}, "locomo_feedback": {"config": config}}
    return demo_defs.resolve_job_def("locomo_demo_job"), {"ops": ops}, str(data_path)


def _run(
    data_path: Path | None,
    conversations: list[str] | None,
    say: Callable[[str], None],
    policy: LearningPolicyResource | None,
    stop: StopSignals,
    progress: Progress,
) -> list[PartitionResult]:
    store = store_resource_from_env()
    defs = build_definitions(
        {
            "prme_store": store,
            "evidence_io": evidence_io_from_env(),
            "learning_policy": policy or LearningPolicyResource(),
        }
    )
    data_job, data_config, data_name = _data_job(data_path, conversations, store)
    with dg.DagsterInstance.get() as instance, stop.runs_on(instance):
        say(f"1/4 loading memories and judging real retrievals from {data_name} …")
        demo = data_job.execute_in_process(
            instance=instance, raise_on_error=False, tags=stop.run_tags, run_config={**QUIET, **data_config}
        )
        stop.settle(demo.run_id)
        stop.raise_if_stopped()
        if not demo.success:
            raise DataJobFailed(f"loading the demo data failed: {run_error(demo) or 'see run ' + demo.run_id}")
        say("2/4 discovering learning targets …")
        # the resources go in the context (a keyword would make the sensor build a second context that
        # only the garbage collector closes), and the context is closed here with what it opened
        with dg.build_sensor_context(instance=instance, resources={"prme_store": store}) as tick_context:
            tick = learning_target_discovery_sensor(tick_context)
        for request in tick.dynamic_partitions_requests or ():
            instance.add_dynamic_partitions(LEARNING_TARGETS.name, list(request.partition_keys))
        partitions = sorted(instance.get_dynamic_partitions(LEARNING_TARGETS.name))
        learning = defs.resolve_job_def("prme_learning_job")
        activation = defs.resolve_job_def("activate_profile_job")
        results = []
        advance = progress.task("learning", total=len(partitions))
        for i, partition in enumerate(partitions, 1):
            say(f"3/4 learning {partition} ({i}/{len(partitions)}) …")
            advance(0, description=f"learning {partition}")
            run = learning.execute_in_process(
                partition_key=partition, instance=instance, run_config=QUIET, tags=stop.run_tags, raise_on_error=False
            )
            stop.settle(run.run_id)
            stop.raise_if_stopped()
            result = read_outcome(instance, run, partition)
            if result.passed and result.error is None:
                result = _activate(result, instance, activation, store, stop, say)
            elif not result.failed and _has_active_profile(store, partition):
                result = result.with_activation(KEPT_ACTIVE)
            say(f"    {partition}: {result.summary()}")
            advance()
            results.append(result)
    return results


def _has_active_profile(store, partition: str) -> bool:
    owner, scopes = decode_target(partition)
    with store.client() as client:
        return client.get_active_ranking_profile(owner, scopes) is not None


def _activate(
    result: PartitionResult,
    instance: dg.DagsterInstance,
    job: dg.JobDefinition,
    store,
    stop: StopSignals,
    say: Callable[[str], None],
) -> PartitionResult:
    """Ask the activation sensor's logic; run the activation it requests."""
    request = activation_request(instance, result.partition, store)
    if request == "already active":
        return result.with_activation("already active")
    if not isinstance(request, dg.RunRequest):
        return result.with_activation(f"not requested: {request}")
    say(f"4/4 activating the profile of {result.partition} …")
    ran = job.execute_in_process(
        run_config={**request.run_config, **QUIET},
        partition_key=request.partition_key,
        instance=instance,
        tags={**request.tags, **stop.run_tags},
        raise_on_error=False,
    )
    stop.settle(ran.run_id)
    stop.raise_if_stopped()
    if ran.success:
        return result.with_activation("activated")
    return result.with_activation("activation failed", error=f"activation failed: {run_error(ran)}")
