"""Periodic learning: each night, the partitions whose feedback changed since their last snapshot,
learned in batches (``prme_assets.batching``: one run per batch, every partition gated on its own).

A partition whose feedback did not change is not re-run. Nor is one that a queued or running
learning run already holds, so a tick while last night's batches still run (or a schedule that
ticks often) requests each partition once. A batch's run key is its tick and its (partition,
fingerprint) pairs: a tick evaluated twice launches nothing twice, and a partition whose batch
failed before its snapshot is requested again at the next tick.
"""

import hashlib

import dagster as dg

from prme_assets.batching import batch_run_config, batches, learning_batch_job, partitions_in_flight
from prme_assets.check_records import latest_materialization
from prme_assets.partitions import LEARNING_TARGETS, decode_target
from prme_assets.resources import PrmeStoreResource
from prme_core.learning.discovery import feedback_fingerprint

NIGHTLY_CRON = "0 3 * * *"
DEFAULT_BATCH_SIZE = 50
"""Partitions per learning run: large enough that a run's fixed cost (its process, imports and
step) is a small share of its time, small enough that runs spread over workers and a failed
batch is quick to redo (``benchmarks/scale.py`` measured batch sizes on 2 cores)."""

learning_job = dg.define_asset_job(
    "prme_learning_job",
    selection=dg.AssetSelection.groups("prme_learning"),
    description="Snapshot → split → proposal → holdout → candidate profile for one learning target, with every "
    "gate as a blocking check.",
)


def stale_partitions(instance: dg.DagsterInstance, prme_store: PrmeStoreResource) -> list[tuple[str, str]]:
    """(partition, feedback fingerprint) of partitions whose feedback changed since their last snapshot."""
    out = []
    with prme_store.client() as client:
        for partition in instance.get_dynamic_partitions(LEARNING_TARGETS.name):
            owner, _ = decode_target(partition)
            fingerprint = feedback_fingerprint(client.store, owner)
            last = latest_materialization(instance, "feedback_snapshot", partition)
            if last is None or last.metadata.get("feedback_fingerprint") != fingerprint:
                out.append((partition, fingerprint))
    return out


def learning_requests(
    instance: dg.DagsterInstance, prme_store: PrmeStoreResource, *, batch_size: int, tick: str
) -> list[dg.RunRequest] | dg.SkipReason:
    """One batch run request per ``batch_size`` stale partitions that no learning run holds."""
    busy = partitions_in_flight(instance, learning_job.name)
    stale = [(p, f) for p, f in stale_partitions(instance, prme_store) if p not in busy]
    if not stale:
        held = f"; {len(busy)} are being learned by queued or running runs" if busy else ""
        return dg.SkipReason(f"no partition has new feedback since its last snapshot{held}")
    requests = []
    for batch in batches(stale, batch_size):
        digest = hashlib.sha256("\n".join(f"{p} {f}" for p, f in batch).encode()).hexdigest()[:20]
        requests.append(
            dg.RunRequest(
                run_key=f"learn-batch:{tick}:{digest}",
                run_config=batch_run_config([p for p, _ in batch]),
                tags={"prme/batch_size": str(len(batch))},  # the partitions are in its run config
            )
        )
    return requests


def build_learning_schedule(
    cron_schedule: str = NIGHTLY_CRON, batch_size: int = DEFAULT_BATCH_SIZE
) -> dg.ScheduleDefinition:
    """The nightly learning schedule (``PRME_LEARNING_CRON`` and ``PRME_LEARNING_BATCH_SIZE`` set
    these in the production code location)."""

    @dg.schedule(
        name="nightly_learning_schedule",
        job=learning_batch_job,
        cron_schedule=cron_schedule,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Learning over partitions with new feedback since their last snapshot, {batch_size} per run.",
    )
    def nightly_learning_schedule(context: dg.ScheduleEvaluationContext, prme_store: PrmeStoreResource):
        tick = context.scheduled_execution_time.isoformat(timespec="minutes")
        return learning_requests(context.instance, prme_store, batch_size=batch_size, tick=tick)

    return nightly_learning_schedule


nightly_learning_schedule = build_learning_schedule()
