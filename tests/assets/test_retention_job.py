"""The receipt-retention job through Dagster: it drops the pools of old receipts without feedback,
keeps labelled receipts whole, and reports the receipts and bytes in its output metadata."""

from __future__ import annotations

from datetime import timedelta

from prme_assets.resources import PrmeStoreResource
from prme_assets.retention import receipt_retention_job, receipt_retention_schedule
from prme_core import MemoryClient
from prme_core.feedback import retention
from prme_core.retrieval.pool_replay import check_pool_replay
from prme_core.types import utc_now


def _run(url: str, days: float):
    return receipt_retention_job.execute_in_process(
        resources={"prme_store": PrmeStoreResource(store_url=url)},
        run_config={"ops": {"apply_receipt_retention": {"config": {"older_than_days": days}}}},
        raise_on_error=False,
    )


def _metadata(result):
    (event,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def test_the_retention_job_compacts_unlabelled_receipts_and_reports_the_bytes(tmp_path, monkeypatch):
    url = f"duckdb:///{tmp_path / 'store.duckdb'}"
    with MemoryClient(url) as client:
        for i in range(8):
            client.store_memory("alice", f"alice's note {i} on the bicycle repair")
        kept = client.retrieve("bicycle repair", owner="alice")
        ids = [r.node_id for r in kept.results]
        client.record_relevance(
            kept.metadata.request_id, {ids[0]: True, ids[-1]: False}, owner="alice", method="explicit_user"
        )
        for i in range(3):
            client.retrieve(f"repair note {i}", owner="alice")

    fresh = _run(url, 30)
    assert fresh.success and _metadata(fresh)["receipts_compacted"] == 0

    later = utc_now() + timedelta(days=31)
    monkeypatch.setattr(retention, "utc_now", lambda: later)
    result = _run(url, 30)
    assert result.success
    metadata = _metadata(result)
    assert metadata["receipts_compacted"] == 3 and metadata["bytes_reclaimed"] > 0 and metadata["owners"] == 1
    assert metadata["per_owner"] == {"alice": {"receipts": 3, "bytes": metadata["bytes_reclaimed"]}}
    with MemoryClient(url) as client:
        check_pool_replay(client.get_receipt(kept.metadata.request_id, "alice", with_pool=True))

    refused = _run(url, 0.001)  # under an hour: a configuration error, not an outcome
    assert not refused.success
    assert receipt_retention_schedule.cron_schedule == "30 2 * * *"
