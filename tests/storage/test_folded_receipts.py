"""A receipt and its projection in one row (issue 28, faster retrieve): from migration 11 a DuckDB
store keeps a receipt's projection in the receipt's operations row, so saving a retrieval is one
INSERT; ``receipt_projections`` is a view over those columns and reads the same. PostgreSQL
records the migration and keeps its table. A store written before the migration folds its rows
and reads them back byte for byte, with retention and forgetting working as before."""

from __future__ import annotations

from datetime import timedelta

import pytest

from prme_core import MemoryClient
from prme_core.errors import StoreDamaged
from prme_core.feedback.retention import apply_retention
from prme_core.receipts.replay import check_replay
from prme_core.receipts.store import get_receipt
from prme_core.retrieval.pool_replay import check_pool_replay
from prme_core.storage import base as store_base
from prme_core.storage import duckdb_backend
from prme_core.storage.schema import MIGRATIONS, RECEIPTS_FOLDED_VERSION, RECEIPTS_PACKED_VERSION
from prme_core.types import utc_now

TEXTS = [f"note {i}: the bicycle needs {part}" for i, part in enumerate(("a chain", "brake pads", "a saddle", "oil"))]


def _projection_rows(store, owner: str, request_ids: list[str]) -> dict[str, tuple]:
    with store.transaction(read_only=True) as tx:
        rows = {row[0]: row for row in tx.receipt_projection_rows(owner, request_ids)}
        pools = {row[0]: row for row in tx.receipt_pool_rows(owner, request_ids)}
        dropped = {r: tx.pool_dropped_at(owner, r) for r in request_ids}
    return {r: (rows.get(r), pools.get(r), dropped[r]) for r in request_ids}


def _relation_kind(store) -> str:
    with store.transaction(read_only=True) as tx:
        if store.backend == "duckdb":
            return tx.conn.fetchall(
                "SELECT table_type FROM information_schema.tables WHERE table_name = 'receipt_projections'"
            )[0][0]
        return tx.conn.fetchall("SELECT relkind::text FROM pg_class WHERE relname = 'receipt_projections'")[0][0]


def test_a_retrieval_is_saved_in_one_statement_where_the_store_folds_it(store_url, monkeypatch):
    with MemoryClient(store_url) as client:
        client.store_batch("alice", TEXTS)
        client.retrieve("bicycle chain", owner="alice")
        writes: list[str] = []
        conn = type(_raw_conn(client))
        real = conn.fetchall

        def counted(self, sql, params=()):  # noqa: ANN001, ANN202
            if not sql.lstrip().upper().startswith("SELECT"):
                writes.append(sql.split("(")[0].strip())
            return real(self, sql, params)

        real_bulk = conn.bulk_insert

        def bulk(self, table, columns, rows):  # noqa: ANN001, ANN202
            writes.append(f"INSERT INTO {table}")
            return real_bulk(self, table, columns, rows)

        monkeypatch.setattr(conn, "fetchall", counted)
        monkeypatch.setattr(conn, "bulk_insert", bulk)
        response = client.retrieve("bicycle brake pads", owner="alice")
        monkeypatch.undo()
        folded = client.store.backend == "duckdb"
        assert client.store._receipts_folded is folded
        expected = ["INSERT INTO operations"] + ([] if folded else ["INSERT INTO receipt_projections"])
        assert writes == expected
        assert _relation_kind(client.store) == ("VIEW" if folded else "r")
        found = get_receipt(client.store, "alice", response.metadata.request_id, with_pool=True)
        assert found is not None and found[0] == response.receipt
        check_replay(found[0])
        check_pool_replay(found[0])


def _raw_conn(client):  # noqa: ANN202 - the PostgreSQL connection adapter of a store
    with client.store.transaction(read_only=True) as tx:
        return tx.conn


def test_a_store_written_before_the_fold_folds_its_rows_and_reads_them_unchanged(store_url, monkeypatch):
    owner = "alice"
    with monkeypatch.context() as old_code:
        old_code.setattr(store_base, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version < RECEIPTS_FOLDED_VERSION))
        with MemoryClient(store_url) as old:
            assert old.store._receipts_folded is False
            old.store_batch(owner, TEXTS)
            responses = [old.retrieve(f"bicycle {word}", owner=owner) for word in ("chain", "brakes", "saddle")]
            labelled = responses[0]
            old.record_relevance(
                labelled.metadata.request_id,
                {labelled.results[0].node_id: True},
                owner=owner,
                method="explicit_user",
            )
            # the second receipt's pool is dropped by retention before the upgrade
            apply_retention(old.store, older_than=timedelta(days=30), now=utc_now() + timedelta(days=31))
            ids = [str(r.metadata.request_id) for r in responses]
            before = _projection_rows(old.store, owner, ids)
        assert before[ids[0]][1] is not None and before[ids[1]][1] is None and before[ids[1]][2] is not None

    with MemoryClient(store_url) as client:  # migration 11 runs on the old store
        folded = client.store.backend == "duckdb"
        assert [m.version for m in client.store.applied_migrations()] == [m.version for m in MIGRATIONS]
        assert client.store._receipts_folded is folded
        assert _relation_kind(client.store) == ("VIEW" if folded else "r")
        assert _projection_rows(client.store, owner, ids) == before  # every row read back as it was
        for response in responses:
            found = get_receipt(client.store, owner, response.metadata.request_id)
            assert found is not None and found[0] == response.receipt
        after = client.retrieve("bicycle oil", owner=owner)
        new_id = str(after.metadata.request_id)
        with client.store.transaction(read_only=True) as tx:
            assert tx.receipt_owners() == [owner]
        # retention after the fold drops the new receipt's pool and keeps the labelled one whole
        result = apply_retention(client.store, older_than=timedelta(days=30), now=utc_now() + timedelta(days=31))
        assert result.receipts >= 1
        now_rows = _projection_rows(client.store, owner, [*ids, new_id])
        assert now_rows[ids[0]] == before[ids[0]] and now_rows[new_id][1] is None and now_rows[new_id][2]
        deletion = client.forget_owner(owner)
        assert deletion.rows["receipt_projections"] == 4 and deletion.rows["operations"] >= 4
        with client.store.transaction(read_only=True) as tx:
            assert tx.conn.fetchall("SELECT count(*) FROM receipt_projections WHERE owner = ?", [owner]) == [(0,)]


def test_a_folded_store_refuses_a_projection_without_its_receipt(store_url):
    with MemoryClient(store_url) as client:
        if not client.store._receipts_folded:
            pytest.skip("PostgreSQL keeps projections in their own table (nothing to refuse)")
        with pytest.raises(RuntimeError, match="append_receipt"), client.store.transaction() as tx:
            tx.insert_receipt_projections([("alice", "r1", "0" * 64)])


def test_only_a_retrievals_own_row_leaves_the_duckdb_state_version_alone(tmp_path):
    with MemoryClient(f"duckdb:///{tmp_path / 'prme.duckdb'}") as client:
        client.store_batch("alice", TEXTS)
        version = client.store.state_version()
        response = client.retrieve("bicycle chain", owner="alice")
        assert client.store.state_version() == version
        apply_retention(client.store, older_than=timedelta(days=30), now=utc_now() + timedelta(days=31))
        assert client.store.state_version() > version  # dropping a pool updates the row
        assert duckdb_backend._changes_state("UPDATE operations SET rp_pool = NULL")
        assert get_receipt(client.store, "alice", response.metadata.request_id) is not None


def _columns_of_operations(store) -> list[str]:
    with store.transaction(read_only=True) as tx:
        return [
            r[0]
            for r in tx.conn.fetchall(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'operations' ORDER BY ordinal_position"
            )
        ]


def test_migration_12_packs_a_folded_row_into_sixteen_columns_and_reads_it_unchanged(tmp_path, monkeypatch):
    url = f"duckdb:///{tmp_path / 'prme.duckdb'}"
    with monkeypatch.context() as old_code:
        old_code.setattr(store_base, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version < RECEIPTS_FOLDED_VERSION))
        with MemoryClient(url) as old:
            old.store_batch("alice", TEXTS)
            response = old.retrieve("bicycle chain", owner="alice")
            ids = [str(response.metadata.request_id)]
            before = _projection_rows(old.store, "alice", ids)
    with monkeypatch.context() as folded_code:  # migration 11 only: the projection in 16 rp_ columns
        folded_code.setattr(
            store_base, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version < RECEIPTS_PACKED_VERSION)
        )
        with MemoryClient(url) as folded:
            assert len(_columns_of_operations(folded.store)) == 26
    with MemoryClient(url) as client:
        columns = _columns_of_operations(client.store)
        assert len(columns) == 16 and [c for c in columns if c.startswith("rp_")] == [
            "rp_int_columns",
            "rp_float_columns",
            "rp_pool",
            "rp_pool_dropped_us",
            "rp_head",
            "rp_texts",
        ]
        assert _projection_rows(client.store, "alice", ids) == before
        found = get_receipt(client.store, "alice", response.metadata.request_id, with_pool=True)
        assert found is not None and found[0] == response.receipt
        check_pool_replay(found[0])
        new = client.retrieve("bicycle brake pads", owner="alice")  # written packed, read the same way
        assert get_receipt(client.store, "alice", new.metadata.request_id)[0] == new.receipt


def test_migration_12_stops_on_a_folded_row_whose_duplicated_checksum_disagrees(tmp_path, monkeypatch):
    url = f"duckdb:///{tmp_path / 'prme.duckdb'}"
    with monkeypatch.context() as folded_code:
        folded_code.setattr(
            store_base, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version < RECEIPTS_FOLDED_VERSION)
        )
        with MemoryClient(url) as old:
            old.store_batch("alice", TEXTS)
            old.retrieve("bicycle chain", owner="alice")
        folded_code.setattr(
            store_base, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version < RECEIPTS_PACKED_VERSION)
        )
        with MemoryClient(url) as folded, folded.store.transaction() as tx:
            tx.conn.execute(
                "UPDATE operations SET rp_receipt_checksum = ? WHERE rp_schema_version IS NOT NULL", ["0" * 64]
            )
    with pytest.raises(StoreDamaged, match="migration 12: 1 receipt rows") as raised:
        MemoryClient(url)
    assert "restore the store from a backup" in str(raised.value) and "PRME migration refused" not in str(raised.value)
    with monkeypatch.context() as folded_code:  # nothing of migration 12 was kept
        folded_code.setattr(
            store_base, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version < RECEIPTS_PACKED_VERSION)
        )
        with MemoryClient(url) as folded:
            assert len(_columns_of_operations(folded.store)) == 26


def test_a_retrieval_is_saved_on_the_row_insert_connection_without_the_optimizer(tmp_path):
    """DuckDB runs a single-row INSERT in autocommit on a second connection of the same database
    with the optimizer off: the write is visible at once, a repeated id is refused as before,
    and the connection closes with the store (the file reopens and vacuums)."""
    from prme_core.errors import IdempotencyConflict
    from prme_core.receipts.store import persist_receipt

    url = f"duckdb:///{tmp_path / 'prme.duckdb'}"
    with MemoryClient(url) as client:
        client.store_batch("alice", TEXTS)
        response = client.retrieve("bicycle chain", owner="alice")
        conn = _raw_conn(client)
        assert conn._row_inserts is not None
        assert conn._row_inserts.execute("SELECT current_setting('enable_optimizer')").fetchall() == [(False,)]
        assert conn.raw.execute("SELECT current_setting('enable_optimizer')").fetchall() == [(True,)]
        assert get_receipt(client.store, "alice", response.metadata.request_id) is not None
        with pytest.raises(IdempotencyConflict, match="already has a stored receipt"):
            persist_receipt(client.store, response.receipt)
        inner = None
        with pytest.raises(RuntimeError, match="roll back"), client.store.transaction():
            inner = client.retrieve("bicycle saddle", owner="alice")  # inside a transaction: its connection
            raise RuntimeError("roll back")
        assert inner is not None and inner.metadata.receipt_persisted
        assert get_receipt(client.store, "alice", inner.metadata.request_id) is None  # rolled back with it
        client.vacuum()
        again = client.retrieve("bicycle brake pads", owner="alice")
    with MemoryClient(url) as reopened:
        for r in (response, again):
            found = get_receipt(reopened.store, "alice", r.metadata.request_id, with_pool=True)
            assert found is not None and found[0] == r.receipt
