"""The stored form of a packed pool: lossless, told apart from the packed form, refused when damaged,
and written on each backend the way measured best for it (both forms read on both)."""

from __future__ import annotations

import pytest

from prme_core.receipts import store as receipt_store
from prme_core.receipts.pool import STORED_POOL_MAGIC, PoolColumns, packed_from_stored, pool_digest, stored_pool
from prme_core.retrieval.pool_replay import check_pool_replay


@pytest.fixture
def packed(client):
    for i in range(30):
        client.store_memory("alice", f"note {i}: the bicycle needs a new chain and brake pads")
    response = client.retrieve("bicycle chain", owner="alice")
    return client, response, response.receipt.packed_pool()


def test_the_stored_form_is_lossless_and_smaller(packed):
    _, _, raw = packed
    stored = stored_pool(raw)
    assert stored.startswith(STORED_POOL_MAGIC) and len(stored) < len(raw)
    assert packed_from_stored(stored) == raw and pool_digest(packed_from_stored(stored)) == pool_digest(raw)
    assert packed_from_stored(raw) == raw  # rows written before are read as they are
    PoolColumns.unpack(packed_from_stored(stored))


@pytest.mark.parametrize("damage", ["truncated", "garbled"])
def test_a_damaged_stored_pool_is_refused(packed, damage):
    _, _, raw = packed
    stored = stored_pool(raw)
    bad = stored[: len(stored) // 2] if damage == "truncated" else STORED_POOL_MAGIC + b"\x00" * 64
    with pytest.raises(ValueError, match="stored pool|truncated"):
        packed_from_stored(bad)


def test_each_backend_writes_its_form_and_reads_both(packed, monkeypatch):
    client, response, raw = packed
    with client.store.transaction(read_only=True) as tx:
        (row,) = tx.receipt_pool_rows("alice", [str(response.metadata.request_id)])
    compressed = client.store.backend in receipt_store.COMPRESSED_POOL_BACKENDS
    assert bytes(row[3]).startswith(STORED_POOL_MAGIC) == compressed
    # the other form, written by the other rule, reads and replays the same
    monkeypatch.setattr(
        receipt_store, "COMPRESSED_POOL_BACKENDS", frozenset() if compressed else {client.store.backend}
    )
    other = client.retrieve("bicycle chain", owner="alice")
    receipt = client.get_receipt(other.metadata.request_id, "alice", with_pool=True)
    check_pool_replay(receipt)
    assert receipt.packed_pool() == other.receipt.packed_pool()
