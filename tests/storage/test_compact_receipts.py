"""Compact receipts (issue 28) on both backends: a receipt's canonical bytes stored compressed
where that is smaller on disk, its projection's float block compressed; both read back byte for
byte, fail closed when damaged, and stores written before migration 9 read exactly as before."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from prme_core import MemoryClient
from prme_core.errors import CorruptRecord
from prme_core.receipts import store as receipt_store
from prme_core.receipts.replay import check_replay
from prme_core.receipts.store import OP_RECEIPT, _projection_row, get_receipt, receipt_bytes
from prme_core.retrieval.pool_replay import check_pool_replay
from prme_core.storage import base as store_base
from prme_core.storage import open_store, receipt_rows
from prme_core.storage.compression import float_block_from_stored, stored_float_block
from prme_core.storage.schema import MIGRATIONS
from prme_core.types import to_epoch_us, utc_now
from tests.memory.test_forget import _database_bytes
from tests.receipts.test_receipt_versions import PINNED, VERSIONS, golden, golden_receipt, mf
from tests.tampering import tamper, tamper_projection


def _judged_retrieval(client: MemoryClient, owner: str, query: str):
    client.store_batch(owner, [f"{owner} keeps bees in the garden", f"{owner} sold the honey", f"{owner} likes trains"])
    response = client.retrieve(query, owner=owner, scopes=["personal"])
    client.record_relevance(
        response.metadata.request_id, {response.results[0].node_id: True}, owner=owner, method="explicit_user"
    )
    return response


def _stored_row(store, request_id: str) -> tuple:
    with store.transaction(read_only=True) as tx:
        ((payload, compressed),) = tx.conn.fetchall(
            "SELECT payload, payload_z FROM operations WHERE op_type = ? AND target_id = ?", [OP_RECEIPT, request_id]
        )
        ((floats,),) = tx.conn.fetchall(
            "SELECT float_columns FROM receipt_projections WHERE request_id = ?", [request_id]
        )
    return payload, compressed, bytes(floats)


def test_a_new_receipt_is_stored_compact_and_reads_back_byte_identical_verified_and_replayable(client):
    response = _judged_retrieval(client, "alice", "bees honey")
    request_id = str(response.metadata.request_id)
    payload, compressed, floats = _stored_row(client.store, request_id)
    expected = receipt_bytes(response.receipt)
    if client.store.backend in receipt_store.COMPRESSED_RECEIPT_BACKENDS:
        assert payload == "" and zlib.decompress(bytes(compressed)) == expected
    else:
        assert payload.encode() == expected and compressed is None
    assert len(floats) % 8 != 0  # the float block's compressed form

    found = get_receipt(client.store, "alice", response.metadata.request_id, with_pool=True)
    assert found is not None and receipt_bytes(found[0]) == expected
    check_replay(found[0])
    check_pool_replay(found[0])
    snapshot = client.snapshot_feedback("alice")  # hashes the stored payloads and reads the projections
    assert list(snapshot.receipts) == [request_id] and snapshot.receipts[request_id].checksum == found[1]


@pytest.fixture
def compressing_everywhere(monkeypatch):
    """Receipts stored compressed on both backends, so each backend reads the compressed form."""
    monkeypatch.setattr(receipt_store, "COMPRESSED_RECEIPT_BACKENDS", frozenset({"duckdb", "postgresql"}))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda blob: b"not zlib at all", id="not-zlib"),
        pytest.param(lambda blob: blob[: len(blob) // 2], id="truncated"),
        pytest.param(lambda blob: blob + b"\x00", id="trailing-byte"),
        pytest.param(
            lambda blob: zlib.compress(zlib.decompress(blob).replace(b'"query":"', b'"query":"x')), id="edited-json"
        ),
    ],
)
def test_a_damaged_compressed_receipt_raises_corrupt_record_on_every_read(client, compressing_everywhere, damage):
    response = _judged_retrieval(client, "alice", "bees honey")
    request_id = str(response.metadata.request_id)
    _, compressed, _ = _stored_row(client.store, request_id)
    tamper(
        client.store, "UPDATE operations SET payload_z = ? WHERE target_id = ?", [damage(bytes(compressed)), request_id]
    )
    with pytest.raises(CorruptRecord):
        get_receipt(client.store, "alice", response.metadata.request_id)
    with pytest.raises(CorruptRecord):
        client.get_receipt(response.metadata.request_id, "alice")
    with pytest.raises(CorruptRecord):
        client.snapshot_feedback("alice")


def test_a_damaged_compressed_float_block_fails_the_snapshot(client):
    response = _judged_retrieval(client, "alice", "bees honey")
    request_id = str(response.metadata.request_id)
    _, _, floats = _stored_row(client.store, request_id)
    for damaged in (floats[:-3], b"\x01" * 9, stored_float_block(b"\x00" * 16)):
        tamper_projection(client.store, request_id, float_columns=damaged)
        with pytest.raises(CorruptRecord, match="projection"):
            client.snapshot_feedback("alice")


def test_stored_float_blocks_round_trip_and_never_look_plain():
    rng = np.random.default_rng(5)
    padded = 0
    for n in range(0, 400, 3):
        block = rng.choice([0.0, 0.5, 1.0, rng.random()], size=n).astype("<f8").tobytes()
        stored = stored_float_block(block)
        padded += len(zlib.compress(block, 6)) % 8 == 0
        assert len(stored) % 8 != 0 and float_block_from_stored(stored, "x") == block
        assert float_block_from_stored(block, "x") == block  # a plain block reads as it is
    assert padded  # the padded form was exercised
    with pytest.raises(CorruptRecord, match="does not inflate"):
        float_block_from_stored(zlib.compress(b"\x00" * 8) + b"\x00\x01", "x")


def test_a_store_written_at_schema_version_8_reads_its_old_receipts_byte_identically(store_url, monkeypatch):
    receipts = [golden_receipt(v) for v in VERSIONS]
    with monkeypatch.context() as old_code:
        old_code.setattr(store_base, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version <= 8))
        old_code.setattr(receipt_rows, "REF_BACKENDS", frozenset())  # no node references before migration 10
        old = open_store(store_url)
        assert [m.version for m in old.applied_migrations()][-1] == 8
        with old.transaction() as tx:  # the rows exactly as the code before migration 9 wrote them
            for receipt in receipts:
                body = receipt_bytes(receipt)
                tx.conn.execute(
                    "INSERT INTO operations (id, owner, op_type, scope_key, target_id, payload, checksum, admitted_us) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        receipt_store.receipt_operation_id(receipt.owner, receipt.request_id),
                        receipt.owner,
                        OP_RECEIPT,
                        receipt_store.scope_key(receipt.scopes),
                        str(receipt.request_id),
                        body.decode(),
                        PINNED[mf.fixture_name(receipt.schema_version)],
                        to_epoch_us(utc_now()),
                    ],
                )
                tx.insert_receipt_projections(
                    [_projection_row(receipt, PINNED[mf.fixture_name(receipt.schema_version)], "none")]
                )
        old.close()

    store = open_store(store_url)  # migration 9 and every later one run on the old store
    try:
        assert [m.version for m in store.applied_migrations()] == [m.version for m in MIGRATIONS]
        for receipt in receipts:
            found = get_receipt(store, mf.OWNER, receipt.request_id)
            assert found is not None and found[1] == PINNED[mf.fixture_name(receipt.schema_version)]
            assert receipt_bytes(found[0]) == golden(receipt.schema_version)
        ids = [str(r.request_id) for r in receipts]
        with store.transaction(read_only=True) as tx:
            integrity = tx.operation_integrity(mf.OWNER, OP_RECEIPT, ids, "projection_sha256")
            projections = {row[0]: row for row in tx.receipt_projection_rows(mf.OWNER, ids)}
        assert sorted(t for t, *_ in integrity) == sorted(ids) and all(intact for _, _, intact, _ in integrity)
        assert set(projections) == set(ids)
        with store.transaction(read_only=True) as tx:
            assert tx.conn.fetchall("SELECT count(*) FROM operations WHERE payload_z IS NOT NULL") == [(0,)]
    finally:
        store.close()


def test_forgetting_an_owner_removes_its_compact_receipt_rows_and_their_bytes(client):
    response = _judged_retrieval(client, "forget-me", "bees honey")
    request_id = str(response.metadata.request_id)
    _, compressed, floats = _stored_row(client.store, request_id)
    client.vacuum()
    # what of the receipt a grep can see: its compressed bytes on PostgreSQL (a run inside the
    # first TOAST chunk), the compressed float block on DuckDB (stored as written)
    visible = bytes(compressed)[100:164] if compressed is not None else None
    assert visible is None or visible in _database_bytes(client)  # the control

    client.forget_owner("forget-me")
    with client.store.transaction(read_only=True) as tx:
        assert tx.conn.fetchall("SELECT count(*) FROM operations WHERE target_id = ?", [request_id]) == [(0,)]
        assert tx.conn.fetchall("SELECT count(*) FROM receipt_projections WHERE request_id = ?", [request_id]) == [(0,)]
    client.vacuum()
    assert visible is None or visible not in _database_bytes(client)
    assert len(floats) > 8
