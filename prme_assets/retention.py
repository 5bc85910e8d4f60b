"""Receipt retention as a Dagster job and a daily schedule: the scored pools of receipts without
feedback older than the window are dropped (``prme_core.feedback.retention``); the run's
metadata says how many receipts per owner and how many bytes of pools were dropped.

The job changes no ranking and no evidence learning reads (labelled receipts keep everything),
so it runs unattended; the window is run configuration (``older_than_days``, default 30).
"""

from datetime import timedelta

import dagster as dg

from prme_assets.resources import PrmeStoreResource
from prme_core.feedback.retention import DEFAULT_RETENTION, MIN_RETENTION

RETENTION_CRON = "30 2 * * *"  # daily, before the nightly learning run at 03:00


class RetentionConfig(dg.Config):
    older_than_days: float = DEFAULT_RETENTION / timedelta(days=1)
    """Receipts without feedback admitted longer ago than this lose their stored pool (at least one hour)."""


@dg.op(description="Drop the scored pools of receipts without feedback older than the window; report the bytes.")
def apply_receipt_retention(
    context: dg.OpExecutionContext, config: RetentionConfig, prme_store: PrmeStoreResource
) -> dg.Output[int]:
    window = timedelta(days=config.older_than_days)
    if window < MIN_RETENTION:
        raise dg.Failure(f"older_than_days must be at least {MIN_RETENTION / timedelta(days=1):.4f} (one hour)")
    with prme_store.client() as client:
        result = client.apply_receipt_retention(older_than=window)
    context.log.info(
        f"dropped the pools of {result.receipts} receipts without feedback older than {window} "
        f"({result.bytes:,} bytes) across {len(result.compacted)} owners"
    )
    return dg.Output(
        result.bytes,
        metadata={
            "cutoff": dg.MetadataValue.text(result.cutoff.isoformat()),
            "older_than_days": dg.MetadataValue.float(config.older_than_days),
            "receipts_compacted": dg.MetadataValue.int(result.receipts),
            "bytes_reclaimed": dg.MetadataValue.int(result.bytes),
            "owners": dg.MetadataValue.int(len(result.compacted)),
            "per_owner": dg.MetadataValue.json(
                {o: {"receipts": n, "bytes": result.bytes_dropped[o]} for o, n in sorted(result.compacted.items())}
            ),
        },
    )


@dg.job(
    name="prme_receipt_retention_job",
    description="Receipt retention: drop the scored pools of receipts without feedback older than the window "
    "(their JSON, checksum and returned list stay; labelled receipts keep everything).",
)
def receipt_retention_job() -> None:
    apply_receipt_retention()


receipt_retention_schedule = dg.ScheduleDefinition(
    name="prme_receipt_retention_daily",
    job=receipt_retention_job,
    cron_schedule=RETENTION_CRON,
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Daily receipt retention (turn it on in the UI; the window is run config, default 30 days).",
)
