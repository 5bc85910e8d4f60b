"""The feedback snapshot cut on both backends: bounded, verified, reproducible."""

from datetime import datetime, timezone

import pytest

from prme_core.errors import CorruptRecord, InvalidInput
from prme_core.learning.snapshot import SnapshotTooLarge, load_snapshot

NOW = datetime(2024, 6, 1, tzinfo=timezone.utc)


@pytest.fixture
def judged(client):
    client.store_batch("alice", [f"Alice: memory {i} about cats and trains" for i in range(12)])
    client.store_batch("bob", ["Bob: a memory about cats"])
    for i in range(5):
        r = client.retrieve(f"cats trains {i}", owner="alice", scopes=["personal"], reference_time=NOW, limit=6)
        client.record_relevance(r.metadata.request_id, {c.node_id: j % 2 == 0 for j, c in enumerate(r.receipt.candidates)},
                                owner="alice", method="structured_evaluation")
    rb = client.retrieve("cats", owner="bob", scopes=["personal"], reference_time=NOW)
    client.record_relevance(rb.metadata.request_id, {rb.results[0].node_id: True}, owner="bob", method="explicit_user")
    return client


def _tamper(client, sql, params):
    with client.store.transaction() as tx:
        pg = client.store.backend == "postgresql"
        for table in ("operations", "receipt_projections"):
            if pg:
                tx.conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        tx.conn.execute(sql, params)
        for table in ("operations", "receipt_projections"):
            if pg:
                tx.conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


def test_the_cut_holds_only_the_owners_records_with_verified_receipts(judged):
    snapshot = judged.snapshot_feedback("alice")
    assert len(snapshot.records) == 5 and len(snapshot.receipts) == 5
    assert all(r.owner == "alice" for r in snapshot.records)
    assert all(snapshot.receipts[r.request_id].checksum == r.receipt_checksum for r in snapshot.records)


def test_records_admitted_after_the_cut_are_not_in_it_and_the_manifest_reloads_it_exactly(judged):
    snapshot = judged.snapshot_feedback("alice")
    r = judged.retrieve("cats later", owner="alice", scopes=["personal"], reference_time=NOW)
    judged.record_relevance(r.metadata.request_id, {r.results[0].node_id: True}, owner="alice", method="explicit_user")
    reloaded = load_snapshot(judged.store, snapshot.manifest())
    assert reloaded.snapshot_sha256 == snapshot.snapshot_sha256 and len(reloaded.records) == 5
    assert judged.snapshot_feedback("alice").snapshot_sha256 != snapshot.snapshot_sha256


def test_exceeding_max_records_fails_and_never_truncates(judged):
    assert len(judged.snapshot_feedback("alice", max_records=5).records) == 5
    with pytest.raises(SnapshotTooLarge, match="max_records=4"):
        judged.snapshot_feedback("alice", max_records=4)
    for bad in (0, 100_001, True, "10"):
        with pytest.raises(InvalidInput, match="max_records"):
            judged.snapshot_feedback("alice", max_records=bad)


def test_a_corrupt_receipt_payload_fails_the_cut(judged):
    record = judged.list_relevance("alice")[0]
    _tamper(judged, "UPDATE operations SET payload = replace(payload, '\"query\":\"', '\"query\":\"x') "
                    "WHERE op_type = 'retrieval_receipt' AND target_id = ?", [str(record.request_id)])
    with pytest.raises(CorruptRecord, match="no longer matches its checksum"):
        judged.snapshot_feedback("alice")


def test_a_corrupt_candidate_projection_fails_the_cut(judged):
    record = judged.list_relevance("alice")[0]
    _tamper(judged, "UPDATE receipt_projections SET adjustments = ? WHERE request_id = ?",
            ['[{"coefficient":0.5,"kind":"session_decay"}]', str(record.request_id)])
    with pytest.raises(CorruptRecord, match="projection"):
        judged.snapshot_feedback("alice")


def test_engine_evaluate_learning_is_deterministic_and_changes_nothing(judged):
    first = judged.evaluate_learning("alice", scopes=["personal"])
    second = judged.evaluate_learning("alice", scopes=["personal"])
    assert first.canonical_bytes() == second.canonical_bytes()
    assert first.decision == "insufficient_data" and first.coverage.feedback_records == 5
    assert judged.retrieve("cats", owner="alice", scopes=["personal"], reference_time=NOW).metadata.ranking_profile_status == "none"
