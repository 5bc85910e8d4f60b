"""The project's main job, run in process against the local Dagster instance."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from prme_assets.definitions import defs
from prme_core.datasets.locomo import default_locomo_path


def run_main(*, data_path: str | None, conversations: list[str] | None, say: Callable[[str], None]) -> int:
    path = data_path or default_locomo_path()
    if path is None:
        say("No LoCoMo data found: pass --data or set PRME_LOCOMO_PATH.")
        return 2
    job = defs.resolve_job_def("locomo_demo_job")
    config = {"ops": {"locomo_memories": {"config": {"data_path": str(path), "conversations": conversations or []}}}}
    say(f"Loading LoCoMo memories from {path} …")
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=config, instance=instance)
    if not result.success:
        say("The main job failed; see the Dagster run log above.")
        return 1
    meta = result.asset_materializations_for_node("locomo_memories")[0].metadata
    print(meta["owners_table"].value)
    print(f"\n{meta['memories_stored'].value} memories stored for {meta['owners'].value} owners "
          f"({meta['memories_added'].value} added by this run).")
    return 0
