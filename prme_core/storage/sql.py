"""What every part of a store session shares: the connection a backend supplies, the column
layouts of the tables, the session's base (its connection, backend and per-key locks) and the
SQL helpers (placeholders, batches)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

NODE_COLUMNS = (
    "owner",
    "id",
    "version",
    "scope",
    "node_type",
    "content",
    "content_hash",
    "session_id",
    "event_us",
    "created_us",
    "updated_us",
    "valid_from_us",
    "valid_to_us",
    "salience",
    "confidence",
    "epistemic_type",
    "lifecycle",
    "metadata",
    "superseded_by",
)
EDGE_COLUMNS = ("owner", "id", "source_id", "target_id", "edge_type", "weight", "created_us", "metadata")
OPERATION_COLUMNS = (
    "seq",
    "id",
    "owner",
    "op_type",
    "scope_key",
    "target_id",
    "payload",
    "checksum",
    "admitted_us",
    "payload_z",  # the payload compressed, or NULL (storage.compression)
)
_NODE_SELECT = ", ".join(NODE_COLUMNS)
_OP_SELECT = ", ".join(OPERATION_COLUMNS)
IN_BATCH = 500


# Row layouts of the operations log and the receipt projections.
NEW_OPERATION_COLUMNS = OPERATION_COLUMNS[1:]  # every column but seq, which the database assigns
PROJECTION_HEADER_COLUMNS = ("schema_version", "scope_key", "query", "ranking_policy", "fusion", "candidate_count")
PROJECTION_COLUMNS = (
    "owner",
    "request_id",
    "receipt_checksum",
    *PROJECTION_HEADER_COLUMNS,
    "int_columns",
    "float_columns",
    "node_ids",
    "base_node_ids",
    "adjustments",
    "pool_sha256",
    "pool_flags",
    "pool",
)
PROJECTION_STATE_COLUMNS = ("pool_dropped_us",)
"""Columns of ``receipt_projections`` that a row gains after it is written (retention marks when
it dropped the pool); never in the inserted row."""
FOLDED_PROJECTION_COLUMNS = ("rp_head", "rp_texts", "rp_int_columns", "rp_float_columns", "rp_pool")
"""Where a folded store (DuckDB from migration 12, ``SessionBase.receipts_folded``) keeps a
receipt's projection: in the receipt's own operations row, so saving a retrieval is one INSERT
(the owner, request id, checksum and scope key are the row's ``owner``, ``target_id``,
``checksum`` and ``scope_key``); the header fields are one JSON object (``rp_head``,
``schema.PACKED_HEAD_FIELDS``) and the candidate texts one newline-joined text (``rp_texts``,
``schema.PACKED_TEXT_FIELDS``), since DuckDB's cost of every INSERT into the log grows with the
table's column count. ``receipt_projections`` is then a view that reads them apart, and every
read of it stays as it was."""
FOLDED_STATE_COLUMNS = tuple(f"rp_{c}" for c in PROJECTION_STATE_COLUMNS)
ARTIFACT_NODE_COLUMNS = tuple(c for c in NODE_COLUMNS if c not in ("owner", "content"))
"""Every stored column of a node version but the owner (the digest names it once) and the content
(its hash stands for it)."""
ARTIFACT_EDGE_COLUMNS = tuple(c for c in EDGE_COLUMNS if c != "owner")


class Connection(Protocol):
    """What a backend supplies to a session: SQL execution, bulk insert and key locks."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...
    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...
    def bulk_insert(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> None: ...
    def lock_key(self, key: str) -> None: ...
    def sha256_sql(self, column: str) -> str | None: ...
    def id_filter(self, column: str, ids: Sequence[str]) -> Any: ...
    def stream_arrow(self, sql: str, params: Sequence[Any] = (), batch_rows: int = 4096) -> Iterable[Any]: ...

    id_batch: int | None

    def fetch_arrow(self, sql: str, params: Sequence[Any] = ()) -> Any: ...


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def _chunks(values: Sequence[Any], size: int = IN_BATCH) -> Iterable[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class SessionBase:
    """A transaction's connection and backend; each aggregate's rows are a mixin over it."""

    def __init__(self, conn: Connection, backend: str) -> None:
        self.conn = conn
        self.backend = backend
        self._memory_written: set[str] = set()  # owners whose revision this transaction bumps
        self.receipts_folded = False  # receipt projections live in the operations row (FOLDED_PROJECTION_COLUMNS)

    def lock(self, key: str) -> None:
        """Serialize writers of one logical key until this transaction ends."""
        self.conn.lock_key(key)
