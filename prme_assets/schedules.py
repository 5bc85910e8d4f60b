"""Periodic learning: each night, a run for every partition whose feedback changed since its
last snapshot. A partition whose inputs did not change is not re-run: the request is skipped,
and its run key (partition + feedback fingerprint) could not launch twice anyway."""

import dagster as dg

from prme_assets.check_records import latest_materialization
from prme_assets.partitions import LEARNING_TARGETS, decode_target
from prme_assets.resources import PrmeStoreResource
from prme_core.learning.discovery import feedback_fingerprint

LEARNING_TAG = "prme/learning_target"
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


@dg.schedule(
    job=learning_job,
    cron_schedule="0 3 * * *",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Nightly learning over partitions with new feedback since their last snapshot.",
)
def nightly_learning_schedule(context: dg.ScheduleEvaluationContext, prme_store: PrmeStoreResource):
    stale = stale_partitions(context.instance, prme_store)
    if not stale:
        return dg.SkipReason("no partition has new feedback since its last snapshot")
    return [
        dg.RunRequest(
            run_key=f"learn:{partition}:{fingerprint}", partition_key=partition, tags={LEARNING_TAG: partition}
        )
        for partition, fingerprint in stale
    ]
