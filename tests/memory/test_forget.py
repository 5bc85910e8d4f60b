"""Forgetting on both backends: a deleted memory's text leaves the database files after a
vacuum, a forgotten owner leaves no row but its deletion record, other owners are untouched and
every remaining receipt still verifies and replays."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import psycopg
import pytest

from prme_core import MemoryClient
from prme_core.errors import NodeNotFound, Unauthenticated
from prme_core.receipts.replay import check_replay
from prme_core.retrieval.pool_replay import check_pool_replay
from prme_core.storage.url import duckdb_path, parse_store_url


def _secret(tag: str) -> str:
    """Content no compression can hide: long, random, found byte for byte if it is on disk."""
    return f"{tag} " + secrets.token_hex(96)


def _database_bytes(client: MemoryClient) -> bytes:
    """Every byte of the store's files: the DuckDB file and its log, or on PostgreSQL the files
    of every table, TOAST table and index of the store's schema (after a checkpoint)."""
    url = parse_store_url(client.settings.store_url)
    if url.backend == "duckdb":
        path = duckdb_path(url.target)
        assert path is not None
        wal = Path(str(path) + ".wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    schema = url.options["prme_schema"]
    with psycopg.connect(url.target, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        root = Path(conn.execute("SHOW data_directory").fetchone()[0])
        files = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'i', 't') "
            "UNION SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.reltoastrelid <> 0",
            [schema, schema],
        ).fetchall()
    out = b""
    for (rel,) in files:
        if rel is None:
            continue
        for segment in sorted(root.glob(rel + "*")):
            if segment.name.split(".")[0] == Path(rel).name and not segment.name.endswith(("_fsm", "_vm")):
                out += segment.read_bytes()
    return out


def _rows_naming(client: MemoryClient, needle: str) -> dict[str, int]:
    """Per table, the rows whose any column holds ``needle``."""
    found: dict[str, int] = {}
    with client.store.transaction(read_only=True) as tx:
        if client.store.backend == "duckdb":
            tables = [t for (t,) in tx.conn.fetchall("SELECT table_name FROM duckdb_tables()")]
        else:
            tables = [
                t
                for (t,) in tx.conn.fetchall(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                )
            ]
        for table in tables:
            hits = sum(needle in repr(row) for row in tx.conn.fetchall(f"SELECT * FROM {table}"))
            if hits:
                found[table] = hits
    return found


def _retrieve_and_label(client: MemoryClient, owner: str, query: str):
    response = client.retrieve(query, owner=owner)
    ids = [r.node_id for r in response.results]
    client.record_relevance(
        response.metadata.request_id, {ids[0]: True, ids[-1]: False}, owner=owner, method="explicit_user"
    )
    return response


def test_a_deleted_memory_leaves_the_files_and_its_receipts_still_verify(client):
    secret = _secret("alice's passport number")
    doomed = client.store_memory("alice", secret)
    kept = client.store_memory("alice", "alice's passport number is kept in the drawer")
    client.link("alice", kept.id, doomed.id, "relates_to")
    response = _retrieve_and_label(client, "alice", "passport number")
    assert doomed.id in {r.node_id for r in response.results}
    client.vacuum()
    assert secret.encode() in _database_bytes(client)  # the control: the check can see it

    record = client.delete_memory(doomed.id, owner="alice", actor="test-suite")
    assert (record.kind, record.memory_id, record.actor) == ("memory", doomed.id, "test-suite")
    assert [v.content_sha256 for v in record.versions] == [doomed.content_hash]
    assert secret not in record.model_dump_json()
    assert client.deletion_records("alice") == [record]

    with pytest.raises(NodeNotFound) as deleted:
        client.get("alice", doomed.id)
    unknown_id = type(doomed.id)(int=doomed.id.int ^ 1)
    with pytest.raises(NodeNotFound) as unknown:
        client.get("alice", unknown_id)
    assert str(deleted.value).replace(str(doomed.id), "X") == str(unknown.value).replace(str(unknown_id), "X")
    assert client.edges("alice", kept.id) == []
    assert client.get("alice", kept.id) == kept
    assert doomed.id not in {r.node_id for r in client.retrieve("passport number", owner="alice").results}

    # the receipt that returned it still verifies (checksum on read), replays and re-ranks its pool
    receipt = client.get_receipt(response.metadata.request_id, "alice", with_pool=True)
    assert receipt is not None and doomed.id in {c.node_id for c in receipt.candidates}
    check_replay(receipt)
    check_pool_replay(receipt)

    vacuumed = client.vacuum()
    assert vacuumed.bytes_after > 0 and vacuumed.reclaimed == vacuumed.bytes_before - vacuumed.bytes_after
    assert secret.encode() not in _database_bytes(client)
    assert secret[:40] not in repr(_rows_naming(client, secret[:40]))


def test_deleting_a_foreign_or_unknown_memory_is_not_found_and_writes_nothing(client):
    mine = client.store_memory("alice", "alice's note")
    before = _rows_naming(client, "alice")
    for owner, node in (("bob", mine.id), ("alice", type(mine.id)(int=mine.id.int ^ 1))):
        with pytest.raises(NodeNotFound, match="does not exist for this owner"):
            client.delete_memory(node, owner=owner)
    assert _rows_naming(client, "alice") == before and client.deletion_records("bob") == []
    assert client.get("alice", mine.id) == mine


def test_a_forgotten_owner_leaves_only_its_deletion_record(client):
    owner = "forget-me-" + secrets.token_hex(4)
    secret = _secret("the owner's diary")
    client.store_memory(owner, secret)
    client.store_memory(owner, "diary entry about the garden")
    _retrieve_and_label(client, owner, "diary garden")
    client.create_api_key(owner, role="operator")
    other = client.store_memory("bob", "bob keeps a diary too")
    bob_key = client.create_api_key("bob")
    bob_response = _retrieve_and_label(client, "bob", "diary")
    client.vacuum()
    assert secret.encode() in _database_bytes(client)

    record = client.forget_owner(owner, actor="operator-key-1")
    assert record.kind == "owner" and record.rows["memory_nodes"] == 2 and record.rows["operations"] >= 3
    assert _rows_naming(client, owner) == {"deletions": 1}
    assert client.scan(owner).items == ()
    again = client.forget_owner(owner)  # idempotent: nothing left to delete, and recorded
    assert set(again.rows.values()) == {0} and len(client.deletion_records(owner)) == 2

    # bob is untouched: his memory, key, receipt (verified and replayed) and feedback
    assert client.get("bob", other.id) == other
    assert client.authenticate(bob_key.api_key).owner == "bob"
    receipt = client.get_receipt(bob_response.metadata.request_id, "bob", with_pool=True)
    assert receipt is not None
    check_replay(receipt)
    check_pool_replay(receipt)

    client.vacuum()
    assert secret.encode() not in _database_bytes(client)


def test_a_forgotten_owners_keys_stop_working(client):
    key = client.create_api_key("carol")
    assert client.authenticate(key.api_key).owner == "carol"
    client.forget_owner("carol")
    with pytest.raises(Unauthenticated):
        client.authenticate(key.api_key)


def test_an_owner_stored_again_after_forgetting_never_sees_the_forgotten_memories(client):
    """The retrieval cache is keyed by the owner's memory revision; forgetting keeps the revision
    in the deletion record, so new writes continue above it and a cached corpus is never reused."""
    owner = "returning"
    for i in range(3):
        client.store_memory(owner, f"old memory about sailing number {i}")
    assert client.retrieve("sailing", owner=owner).results  # builds and caches the corpus
    client.forget_owner(owner)
    for i in range(3):
        client.store_memory(owner, f"new memory about cooking number {i}")
    contents = {client.get(owner, r.node_id).content for r in client.retrieve("sailing", owner=owner).results}
    assert contents and all("cooking" in c for c in contents)


def test_vacuum_on_a_fresh_store_reclaims_nothing_and_keeps_every_row(client):
    node = client.store_memory("alice", "kept through a vacuum")
    assert client.vacuum().bytes_after > 0
    assert client.get("alice", node.id) == node
    client.store_memory("alice", "written after the vacuum")
    assert sum(1 for _ in client.iterate("alice")) == 2


@pytest.mark.skipif(os.name != "posix", reason="file bytes are read from the local disk")
def test_the_duckdb_vacuum_keeps_the_sequences_going(tmp_path):
    with MemoryClient(f"duckdb:///{tmp_path / 'p.duckdb'}") as client:
        first = client.store_memory("alice", "one")
        client.delete_memory(first.id, owner="alice")
        client.vacuum()
        second = client.store_memory("alice", "two")
        record = client.delete_memory(second.id, owner="alice")
        assert [r.seq for r in client.deletion_records("alice")][-1] == record.seq
        assert len({r.seq for r in client.deletion_records("alice")}) == 2
