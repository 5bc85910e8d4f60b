"""Raw SQL past the store's append-only guard: what an intruder or a bad restore could do to
the files (never PRME itself), for tests that prove reads fail closed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prme_core.storage.receipt_rows import packed_projection_values
from prme_core.storage.sql import FOLDED_PROJECTION_COLUMNS, PROJECTION_COLUMNS

APPEND_ONLY_TABLES = ("operations", "receipt_projections")


def tamper(store: Any, sql: str, params: Sequence[Any] = ()) -> None:
    """Run ``sql`` in one transaction with PostgreSQL's append-only triggers off (DuckDB has none)."""
    pg = store.backend == "postgresql"
    with store.transaction() as tx:
        for table in APPEND_ONLY_TABLES if pg else ():
            tx.conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        tx.conn.execute(sql, list(params))
        for table in APPEND_ONLY_TABLES if pg else ():
            tx.conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


def tamper_projection(store: Any, request_id: str, **columns: Any) -> None:
    """Overwrite columns of one receipt's projection (``receipt_projections`` names), wherever the
    store keeps it: its own table, or the receipt's operations row on a store that folds them
    (``storage.sql.FOLDED_PROJECTION_COLUMNS``, where ``receipt_projections`` is a view and the
    header fields and candidate texts are packed)."""
    if not store._receipts_folded:
        sets = ", ".join(f"{name} = ?" for name in columns)
        tamper(store, f"UPDATE receipt_projections SET {sets} WHERE request_id = ?", [*columns.values(), request_id])
        return
    if {"receipt_checksum", "scope_key"} & set(columns):
        raise ValueError("a folded row keeps its checksum and scope key once, in the operation itself")
    with store.transaction(read_only=True) as tx:
        (row,) = tx.conn.fetchall(
            f"SELECT {', '.join(PROJECTION_COLUMNS)} FROM receipt_projections WHERE request_id = ?", [request_id]
        )
    values = packed_projection_values({**dict(zip(PROJECTION_COLUMNS, row, strict=True)), **columns})
    sets = ", ".join(f"{name} = ?" for name in FOLDED_PROJECTION_COLUMNS)
    tamper(store, f"UPDATE operations SET {sets} WHERE target_id = ? AND rp_head IS NOT NULL", [*values, request_id])


def edit_receipt_payload(store: Any, request_id: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in a stored receipt's canonical JSON, in whichever form it is
    stored (text, or compressed in ``payload_z``), leaving its checksum as it was."""
    import zlib

    with store.transaction(read_only=True) as tx:
        ((payload, compressed),) = tx.conn.fetchall(
            "SELECT payload, payload_z FROM operations WHERE op_type = 'retrieval_receipt' AND target_id = ?",
            [request_id],
        )
    if compressed is None:
        tamper(store, "UPDATE operations SET payload = ? WHERE target_id = ?", [payload.replace(old, new), request_id])
        return
    edited = zlib.decompress(bytes(compressed)).decode().replace(old, new)
    tamper(
        store, "UPDATE operations SET payload_z = ? WHERE target_id = ?", [zlib.compress(edited.encode()), request_id]
    )
