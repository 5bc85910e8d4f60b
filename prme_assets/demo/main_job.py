"""The project's main job: the whole learning loop over LoCoMo, in process, on the local
instance (no server): load memories, judge real retrievals, register holdout questions (the
demo location's job), discover partitions, materialize every partition with its gates, let the
activation sensor decide, run the activations it requested (the production location's jobs),
and print each partition's outcome."""

from collections.abc import Callable
from pathlib import Path

import dagster as dg

from prme_assets.activation import activation_request
from prme_assets.check_records import latest_checks
from prme_assets.checks import GATE_CHECKS
from prme_assets.definitions import build_definitions
from prme_assets.demo.definitions import build_demo_definitions
from prme_assets.discovery import learning_target_discovery_sensor
from prme_assets.evidence_io import evidence_io_from_env
from prme_assets.partitions import LEARNING_TARGETS
from prme_assets.resources import LearningPolicyResource, store_resource_from_env


def run_main(*, data_path: Path, conversations: list[str] | None, say: Callable[[str], None],
             policy: LearningPolicyResource | None = None) -> int:
    """``data_path``: the LoCoMo file, already found by the caller (``prme main --data``)."""
    store = store_resource_from_env()
    defs = build_definitions({"prme_store": store, "evidence_io": evidence_io_from_env(),
                              "learning_policy": policy or LearningPolicyResource()})
    demo_defs = build_demo_definitions({"prme_store": store})
    config = {"data_path": str(data_path), "conversations": conversations or []}
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    # a gate that stops a partition is an expected outcome, summarized in the table below
    silent = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    with dg.DagsterInstance.get() as instance:
        say(f"1/4 loading memories and judging real retrievals from {data_path} …")
        demo = demo_defs.resolve_job_def("locomo_demo_job").execute_in_process(
            instance=instance, run_config={**quiet, "ops": {"locomo_memories": {"config": config},
                                                            "locomo_feedback": {"config": config}}})
        if not demo.success:
            say("The data job failed; see the run log above.")
            return 1
        say("2/4 discovering learning targets …")
        tick = learning_target_discovery_sensor(dg.build_sensor_context(instance=instance), prme_store=store)
        for request in tick.dynamic_partitions_requests or ():
            instance.add_dynamic_partitions(LEARNING_TARGETS.name, list(request.partition_keys))
        partitions = sorted(instance.get_dynamic_partitions(LEARNING_TARGETS.name))
        learning = defs.resolve_job_def("prme_learning_job")
        activation = defs.resolve_job_def("activate_profile_job")
        rows = []
        for i, partition in enumerate(partitions, 1):
            say(f"3/4 learning {partition} ({i}/{len(partitions)}) …")
            run = learning.execute_in_process(partition_key=partition, instance=instance, run_config=silent,
                                              raise_on_error=False)
            # gates of this run only: a gate it never reached reads "—", not an older result
            checks = {c.name: c.passed for c in latest_checks(instance, GATE_CHECKS, partition)
                      if c.run_id == run.run_id and c.evaluated}
            request = activation_request(instance, partition, store)
            activated = "no"
            if isinstance(request, dg.RunRequest):
                say(f"4/4 activating the profile of {partition} …")
                ran = activation.execute_in_process(run_config={**request.run_config, **quiet}, instance=instance,
                                                    tags=request.tags, raise_on_error=False)
                activated = "yes" if ran.success else "failed"
            elif request == "already active":
                activated = "already active"
            rows.append((partition, checks, activated))
    names = [name for _, name in GATE_CHECKS]
    print("| partition | " + " | ".join(names) + " | profile activated |")
    print("|---|" + "---|" * len(names) + "---|")
    for partition, checks, activated in rows:
        marks = ["pass" if checks.get(n) else ("fail" if n in checks else "—") for n in names]
        print(f"| {partition} | " + " | ".join(marks) + f" | {activated} |")
    print(f"\n{len(rows)} learning targets; {sum(r[2] in ('yes', 'already active') for r in rows)} with an active profile.")
    return 0
