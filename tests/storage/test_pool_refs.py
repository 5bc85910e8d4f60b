"""Node references (issue 28, migration 10) on both backends: a stored pool's member and outside
ids and a projection's candidate ids are written as the owner's node references and read back
byte for byte (digests verified, pools replayed); a memory's reference outlives its deletion, so
its receipts keep replaying; forgetting the owner removes them; a reference that does not resolve
fails closed; and a store written before migration 10 upgrades and keeps reading every row.

References are written where ``receipt_rows.REF_BACKENDS`` says (PostgreSQL); the tests put the
backend under test there, so the stored form is exercised on DuckDB too."""

from __future__ import annotations

import uuid
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prme_core import MemoryClient
from prme_core.errors import CorruptRecord
from prme_core.receipts import store as receipt_store
from prme_core.receipts.pool import PoolColumns, pool_digest
from prme_core.receipts.projection import packed_projection
from prme_core.receipts.replay import check_replay
from prme_core.receipts.store import get_receipt, load_pool_columns
from prme_core.receipts.stored_pool import (
    STORED_POOL_MAGIC,
    STORED_POOL_MAGIC_V1,
    _feature_region,
    packed_from_stored,
    stored_pool,
)
from prme_core.retrieval.pool_replay import check_pool_replay
from prme_core.storage import base as store_base
from prme_core.storage import receipt_rows
from prme_core.storage.compression import NODE_REFS_MAGIC, pack_refs, unpack_refs
from prme_core.storage.node_rows import NodeRows
from prme_core.storage.schema import MIGRATIONS
from tests.fixtures.receipts import make_fixtures as mf
from tests.tampering import tamper_projection

TEXTS = [
    "the bicycle needs a new chain and brake pads",
    "brake pads for the road bike arrive on friday",
    "the chain was oiled last spring",
    "a new saddle for the bicycle, maybe",
    "the garden shed holds the bicycle pump",
    "friday: pick up the brake pads from the shop",
]


@pytest.fixture
def client(store_url, monkeypatch):
    """A client whose store writes node references (and pools in the form that carries their ids)
    on either backend."""
    with MemoryClient(store_url) as c:
        _by_reference(monkeypatch, c.store.backend)
        yield c


def _by_reference(monkeypatch, backend: str) -> None:
    monkeypatch.setattr(receipt_rows, "REF_BACKENDS", frozenset({backend}))
    monkeypatch.setattr(receipt_store, "COMPRESSED_POOL_BACKENDS", frozenset({backend}))


def _stored(store, request_id: str) -> tuple[bytes, str, str]:
    with store.transaction(read_only=True) as tx:
        ((pool, nodes, bases),) = tx.conn.fetchall(
            "SELECT pool, node_ids, base_node_ids FROM receipt_projections WHERE request_id = ?", [request_id]
        )
    return bytes(pool), nodes, bases


def _tamper_refs(store, sql: str, params: list) -> None:
    """Raw SQL on node_refs past PostgreSQL's append-only trigger (what a bad restore could do)."""
    pg = store.backend == "postgresql"
    with store.transaction() as tx:
        if pg:
            tx.conn.execute("ALTER TABLE node_refs DISABLE TRIGGER USER")
        tx.conn.execute(sql, params)
        if pg:
            tx.conn.execute("ALTER TABLE node_refs ENABLE TRIGGER USER")


def _retrieval(client: MemoryClient, owner: str = "alice", query: str = "bicycle brake pads chain"):
    client.store_batch(owner, [{"content": t, "session_id": "s1"} for t in TEXTS])
    return client.retrieve(query, owner=owner)


def _check_read_back(client: MemoryClient, response) -> None:
    request_id = response.metadata.request_id
    found = get_receipt(client.store, "alice", request_id, with_pool=True)
    assert found is not None
    receipt = found[0]
    assert receipt.packed_pool() == response.receipt.packed_pool()
    check_replay(receipt)
    check_pool_replay(receipt)
    expected = packed_projection(response.receipt)
    with client.store.transaction(read_only=True) as tx:
        (row,) = tx.receipt_projection_rows("alice", [str(request_id)])
    assert (row[10], row[11]) == (expected.node_ids, expected.base_node_ids)
    columns = load_pool_columns(client.store, "alice", {str(request_id): (found[1], receipt.pool.sha256)})
    assert columns[str(request_id)].node_bytes == PoolColumns.unpack(response.receipt.packed_pool()).node_bytes


def test_a_new_pool_and_projection_name_nodes_by_reference_and_read_back_byte_identical(client):
    response = _retrieval(client)
    packed = response.receipt.packed_pool()
    pool, nodes, bases = _stored(client.store, str(response.metadata.request_id))
    assert pool.startswith(NODE_REFS_MAGIC) and len(pool) < len(stored_pool(packed)) < len(packed)
    assert nodes.startswith(receipt_rows.TEXT_REFS_PREFIX) and bases == ""
    _check_read_back(client, response)


def test_a_node_without_a_reference_is_stored_by_its_id_and_reads_the_same(client):
    client.store_batch("alice", [{"content": t, "session_id": "s1"} for t in TEXTS])
    doomed = next(n for n in client.scan("alice").items if "chain" in n.content)
    _tamper_refs(client.store, "DELETE FROM node_refs WHERE id = ?", [str(doomed.id)])
    response = client.retrieve("bicycle brake pads chain", owner="alice")
    assert doomed.id in {r.node_id for r in response.results}
    pool, nodes, _ = _stored(client.store, str(response.metadata.request_id))
    assert pool.startswith(STORED_POOL_MAGIC) and str(doomed.id) in nodes  # ids kept as they came
    _check_read_back(client, response)


def test_a_deleted_memory_keeps_its_reference_and_its_receipts_still_replay(client):
    response = _retrieval(client)
    doomed = response.results[0].node_id
    client.delete_memory(doomed, owner="alice")
    with client.store.transaction(read_only=True) as tx:
        assert tx.conn.fetchall("SELECT count(*) FROM node_refs WHERE id = ?", [str(doomed)]) == [(1,)]
        assert tx.conn.fetchall("SELECT count(*) FROM memory_nodes WHERE id = ?", [str(doomed)]) == [(0,)]
    _check_read_back(client, response)


@pytest.mark.parametrize("damage", ["deleted", "foreign"])
def test_a_reference_that_does_not_resolve_fails_closed(client, damage):
    response = _retrieval(client)
    client.store_batch("bob", ["bob's bicycle"])
    request_id = str(response.metadata.request_id)
    named = str(response.results[0].node_id)
    if damage == "deleted":
        _tamper_refs(client.store, "DELETE FROM node_refs WHERE id = ?", [named])
    else:  # the reference now belongs to another owner: references resolve within the owner only
        _tamper_refs(client.store, "UPDATE node_refs SET owner = 'bob' WHERE id = ?", [named])
    with pytest.raises(CorruptRecord, match="node reference"):
        get_receipt(client.store, "alice", response.metadata.request_id, with_pool=True)
    with pytest.raises(CorruptRecord, match="node reference"), client.store.transaction(read_only=True) as tx:
        list(tx.receipt_projection_rows("alice", [request_id]))
    found = get_receipt(client.store, "alice", response.metadata.request_id)  # the receipt itself still verifies
    assert found is not None
    check_replay(found[0])


def test_a_damaged_stored_reference_block_fails_closed(client):
    response = _retrieval(client)
    request_id = str(response.metadata.request_id)
    pool, nodes, _ = _stored(client.store, request_id)
    bad_pool = pool[: len(NODE_REFS_MAGIC) + 8] + b"\x00" * 16
    bad_nodes = receipt_rows.TEXT_REFS_PREFIX + "not base64!"
    tamper_projection(client.store, request_id, pool=bad_pool, node_ids=bad_nodes)
    with pytest.raises(CorruptRecord):
        get_receipt(client.store, "alice", response.metadata.request_id, with_pool=True)
    with pytest.raises(CorruptRecord, match="node references"), client.store.transaction(read_only=True) as tx:
        list(tx.receipt_projection_rows("alice", [request_id]))


def test_a_caller_id_stored_again_after_its_deletion_keeps_its_reference(client):
    first = client.store_memory("alice", "the bicycle bell is broken")
    with client.store.transaction(read_only=True) as tx:
        ((ref,),) = tx.conn.fetchall("SELECT ref FROM node_refs WHERE id = ?", [str(first.id)])
    client.delete_memory(first.id, owner="alice")
    client.store_batch("alice", [{"id": str(first.id), "content": "the bicycle bell was fixed"}, *TEXTS])
    with client.store.transaction(read_only=True) as tx:
        assert tx.conn.fetchall("SELECT ref FROM node_refs WHERE id = ?", [str(first.id)]) == [(ref,)]
    response = client.retrieve("bicycle bell", owner="alice")
    assert first.id in {r.node_id for r in response.results}
    assert _stored(client.store, str(response.metadata.request_id))[0].startswith(NODE_REFS_MAGIC)
    _check_read_back(client, response)


def test_forgetting_an_owner_removes_its_node_references_and_keeps_the_others(client):
    _retrieval(client, owner="forget-me")
    bob = _retrieval(client, owner="bob", query="bicycle chain")
    record = client.forget_owner("forget-me")
    assert record.rows["node_refs"] == len(TEXTS)
    with client.store.transaction(read_only=True) as tx:
        counts = dict(tx.conn.fetchall("SELECT owner, count(*) FROM node_refs GROUP BY owner"))
    assert counts == {"bob": len(TEXTS)}
    receipt = client.get_receipt(bob.metadata.request_id, "bob", with_pool=True)
    check_pool_replay(receipt)


def _stored_v1(packed: bytes) -> bytes:
    """A pool in the form written before node references (what older rows hold)."""
    start, length = _feature_region(packed)
    planes = np.frombuffer(packed, dtype=np.uint8, count=length, offset=start).reshape(-1, 8).T.tobytes()
    return STORED_POOL_MAGIC_V1 + zlib.compress(packed[:start] + planes + packed[start + length :], 6)


def test_a_store_written_before_migration_10_upgrades_and_keeps_reading_every_row(store_url, monkeypatch):
    with monkeypatch.context() as old_code:
        old_code.setattr(store_base, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version <= 9))
        old_code.setattr(receipt_rows, "REF_BACKENDS", frozenset())
        old_code.setattr(NodeRows, "_reference_new_nodes", lambda self, *args: None)
        old_code.setattr(receipt_store, "_stored", lambda packed, backend: packed and _stored_v1(packed))
        with MemoryClient(store_url) as old:
            assert [m.version for m in old.store.applied_migrations()][-1] == 9
            old.store_batch("alice", TEXTS)
            gone = old.store_memory("alice", "a bicycle note deleted before the upgrade")
            old.delete_memory(gone.id, owner="alice")
            before = old.retrieve("bicycle brake pads chain", owner="alice")
            assert _stored(old.store, str(before.metadata.request_id))[0].startswith(STORED_POOL_MAGIC_V1)

    with MemoryClient(store_url) as client:  # migration 10 runs on the old store
        _by_reference(monkeypatch, client.store.backend)
        assert [m.version for m in client.store.applied_migrations()] == [m.version for m in MIGRATIONS]
        with client.store.transaction(read_only=True) as tx:
            refs = dict(tx.conn.fetchall("SELECT id, ref FROM node_refs WHERE owner = 'alice'"))
            seqs = dict(tx.conn.fetchall("SELECT id, seq FROM memory_nodes WHERE owner = 'alice'"))
        assert refs == seqs and str(gone.id) not in refs  # every memory stored before has its seq
        _check_read_back(client, before)  # the row written before, read as it was
        after = client.retrieve("bicycle brake pads chain", owner="alice")
        assert _stored(client.store, str(after.metadata.request_id))[0].startswith(NODE_REFS_MAGIC)
        _check_read_back(client, after)
        client.store_memory("alice", "a bicycle note stored after the upgrade")
        with client.store.transaction(read_only=True) as tx:
            assert tx.conn.fetchall("SELECT count(*) FROM node_refs WHERE owner = 'alice'") == [(len(TEXTS) + 1,)]


def test_the_golden_pool_reads_back_through_every_stored_form(client):
    golden = (mf.HERE / mf.POOL_FIXTURE).read_bytes()
    digest = pool_digest(golden)
    for stored in (golden, _stored_v1(golden), stored_pool(golden)):
        assert packed_from_stored(stored) == golden and pool_digest(packed_from_stored(stored)) == digest
    columns = PoolColumns.unpack(golden)
    ids = [str(u) for u in (*columns.node_ids, *columns.outside_ids)]
    with client.store.transaction() as tx:
        tx.conn.bulk_insert("node_refs", ("owner", "id"), [("golden", i) for i in ids])
        refs = tx.node_refs("golden", ids)
        names = tx.node_ids_of_refs("golden", list(refs.values()))
    assert sorted(refs) == sorted(ids) and {names[r] for r in refs.values()} == set(ids)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=-1, max_value=2**62), max_size=300))
def test_node_references_pack_and_unpack_exactly(refs):
    values = np.array(refs, dtype=np.int64)
    assert np.array_equal(unpack_refs(pack_refs(values), len(refs), "x"), values)


def test_a_reference_block_of_another_length_or_cut_short_is_refused():
    blob = pack_refs(np.arange(5, dtype=np.int64))
    with pytest.raises(CorruptRecord, match="announces 6"):
        unpack_refs(blob, 6, "the pool")
    with pytest.raises(CorruptRecord, match="does not inflate"):
        unpack_refs(blob[:-3], 5, "the pool")


@pytest.mark.parametrize("cut", [4, 8, 40])
def test_a_stored_pool_cut_short_is_refused(cut):
    golden = (mf.HERE / mf.POOL_FIXTURE).read_bytes()
    stored = stored_pool(golden)
    with pytest.raises(ValueError, match="stored pool"):
        packed_from_stored(stored[: len(STORED_POOL_MAGIC) + cut])
    with pytest.raises(ValueError, match="stored pool"):
        packed_from_stored(stored[:-cut])


def test_references_read_before_an_owner_was_forgotten_are_not_reused(client):
    first = client.store_memory("alice", "the bicycle bell is broken")
    client.store_batch("alice", TEXTS)
    client.retrieve("bicycle bell", owner="alice")  # the connection now knows the bell's reference
    client.forget_owner("alice")
    client.store_batch("alice", [{"id": str(first.id), "content": "the bicycle bell was fixed"}, *TEXTS])
    response = client.retrieve("bicycle bell", owner="alice")
    assert first.id in {r.node_id for r in response.results}
    assert _stored(client.store, str(response.metadata.request_id))[0].startswith(NODE_REFS_MAGIC)
    _check_read_back(client, response)


def test_references_a_rolled_back_transaction_read_are_not_kept(client):
    kept = client.store_memory("alice", "the bicycle bell is broken")
    ghost = kept.model_copy(update={"id": uuid.uuid4()})
    with pytest.raises(RuntimeError), client.store.transaction() as tx:
        tx.insert_nodes([ghost], caller_ids=[])
        assert set(tx.node_refs("alice", [str(ghost.id), str(kept.id)])) == {str(ghost.id), str(kept.id)}
        raise RuntimeError("roll back")
    with client.store.transaction() as tx:
        assert set(tx.node_refs("alice", [str(ghost.id), str(kept.id)])) == {str(kept.id)}
