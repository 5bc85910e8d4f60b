"""Raw SQL past the store's append-only guard: what an intruder or a bad restore could do to
the files (never PRME itself), for tests that prove reads fail closed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
