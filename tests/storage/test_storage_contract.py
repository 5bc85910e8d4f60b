"""Store contract on both backends: migrations, the append-only operations log, verification."""

import pytest

from prme_core.canonical import canonical_json
from prme_core.errors import CorruptRecord, InvalidInput, StoreUnavailable
from prme_core.storage import OperationDraft, open_store, parse_store_url
from prme_core.storage.schema import MIGRATIONS


def _draft(op_id="op-1", owner="alice", body=None, target="t-1"):
    return OperationDraft.of(id=op_id, owner=owner, op_type="test_record", body=body or {"k": 1}, target_id=target)


def test_fresh_store_applies_every_migration_once(open_store_at):
    store = open_store_at()
    applied = store.applied_migrations()
    assert [m.version for m in applied] == [m.version for m in MIGRATIONS]
    assert [m.checksum for m in applied] == [m.checksum for m in MIGRATIONS]


def test_reopening_an_existing_store_applies_nothing_new(open_store_at):
    first = open_store_at().applied_migrations()
    second_store = open_store_at()
    assert second_store.migrate() == []
    assert second_store.applied_migrations() == first


def test_store_refuses_a_migration_record_that_differs_from_the_code(open_store_at, store_url):
    store = open_store_at()
    with store.transaction() as tx:
        tx.conn.execute("UPDATE schema_migrations SET checksum = ? WHERE version = 1", ["0" * 64])
    store.close()
    with pytest.raises(StoreUnavailable, match="migration 1"):
        open_store(store_url)


def test_duckdb_store_creates_parent_folders(tmp_path):
    path = tmp_path / "a" / "b" / "c.duckdb"
    store = open_store(f"duckdb:///{path}")
    store.close()
    assert path.is_file()


def test_store_url_errors_name_the_problem():
    with pytest.raises(InvalidInput, match="store_url"):
        parse_store_url("mysql://x")
    with pytest.raises(InvalidInput, match="duckdb"):
        parse_store_url("duckdb:relative")
    with pytest.raises(InvalidInput, match="unknown DuckDB options"):
        parse_store_url("duckdb:///x.duckdb?colour=blue")


def test_postgres_url_is_redacted_in_logs():
    url = parse_store_url("postgresql://user:secret@db:5432/prme?prme_schema=s1")
    assert "secret" not in url.redacted()
    assert url.options == {"prme_schema": "s1"}


def test_appended_operation_reads_back_verified(open_store_at):
    store = open_store_at()
    with store.transaction() as tx:
        stored, written = tx.append_operation(_draft())
    assert written
    assert stored.payload.encode() == canonical_json({"k": 1})
    with store.transaction() as tx:
        again = tx.get_operation("alice", "op-1")
    assert again == stored
    assert again.admitted_at.tzinfo is not None


def test_appending_an_existing_id_returns_the_first_row_unchanged(open_store_at):
    store = open_store_at()
    with store.transaction() as tx:
        first, _ = tx.append_operation(_draft(body={"k": 1}))
    with store.transaction() as tx:
        second, written = tx.append_operation(_draft(body={"k": 2}))
    assert not written
    assert second == first
    with store.transaction() as tx:
        rows = tx.list_operations("alice", "test_record")
    assert len(rows) == 1


def test_operations_are_read_only_through_their_owner(open_store_at):
    store = open_store_at()
    with store.transaction() as tx:
        tx.append_operation(_draft())
        assert tx.get_operation("mallory", "op-1") is None
        assert tx.find_operation("mallory", "test_record", "t-1") is None
        assert tx.list_operations("mallory", "test_record") == []


def test_a_tampered_payload_fails_verification_on_read(open_store_at, store_url):
    store = open_store_at()
    with store.transaction() as tx:
        tx.append_operation(_draft())
    with store.transaction() as tx:
        if store.backend == "postgresql":
            tx.conn.execute("ALTER TABLE operations DISABLE TRIGGER operations_append_only")
        tx.conn.execute("UPDATE operations SET payload = ? WHERE id = ?", ['{"k":2}', "op-1"])
        if store.backend == "postgresql":
            tx.conn.execute("ALTER TABLE operations ENABLE TRIGGER operations_append_only")
    with store.transaction() as tx, pytest.raises(CorruptRecord, match="checksum"):
        tx.get_operation("alice", "op-1")


def test_postgres_refuses_updates_and_deletes_of_operations(postgres_url):
    store = open_store(postgres_url)
    try:
        with store.transaction() as tx:
            tx.append_operation(_draft())
        for statement in ("UPDATE operations SET owner = 'x'", "DELETE FROM operations"):
            with pytest.raises(Exception, match="append-only"), store.transaction() as tx:
                tx.conn.execute(statement)
        with store.transaction() as tx:
            assert tx.get_operation("alice", "op-1") is not None
    finally:
        store.close()


def test_a_failed_transaction_writes_nothing(open_store_at):
    store = open_store_at()
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.append_operation(_draft())
        raise RuntimeError("boom")
    with store.transaction() as tx:
        assert tx.get_operation("alice", "op-1") is None


def test_operations_survive_close_and_reopen(open_store_at):
    store = open_store_at()
    with store.transaction() as tx:
        stored, _ = tx.append_operation(_draft())
    store.close()
    with open_store_at().transaction() as tx:
        assert tx.get_operation("alice", "op-1") == stored
