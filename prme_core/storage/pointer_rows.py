"""Profile pointer heads in a store session: the derived index of each scope set's newest change."""

from __future__ import annotations

from typing import NamedTuple

from prme_core.storage.operation_log import row_operation
from prme_core.storage.records import StoredOperation
from prme_core.storage.sql import OPERATION_COLUMNS, SessionBase

_OP_SELECT = ", ".join(OPERATION_COLUMNS)
_NO_OP = ", ".join(["NULL"] * len(OPERATION_COLUMNS))


class PointerRead(NamedTuple):
    """What one pointer statement read (``PointerRows.pointer_read``)."""

    head: tuple[str, int | None] | None  # (operation id, log seq) the head row names
    newest: int | None  # log seq of the change index's newest entry
    operation: StoredOperation | None  # the operation asked for by id (unverified)
    memory_revision: int | None  # the owner's memory revision row, when asked for and present


class PointerRows(SessionBase):
    """The pointer head rows and the pointer-change index."""

    def pointer_read(
        self, owner: str, scope_key: str, op_id: str | None = None, *, memory_revision: bool = False
    ) -> PointerRead:
        """In one statement: the head row of (owner, scope key), the change index's newest
        position, with ``op_id`` that operation from the log (looked up by id alone, see
        ``operation_at``), and with ``memory_revision`` the owner's memory revision row (None
        without one: an owner never written or forgotten, whose revision
        ``StoreSession.memory_revision`` reads from the deletion records): a retrieval reads its
        profile pointer and its corpus's revision in one round trip instead of two. (Reading the
        deletion floor here too cost DuckDB more than the second statement it saves, measured.)"""
        branches, params = [], []
        if op_id is not None:
            # The typed branch first: PostgreSQL types a UNION's NULL columns from the branches before.
            branches.append(f"SELECT 2, NULL, NULL, {_OP_SELECT} FROM operations WHERE id = ?")
            params.append(op_id)
        pad = f", {_NO_OP}" if op_id is not None else ""
        branches.append(f"SELECT 0, op_id, op_seq{pad} FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ?")
        branches.append(f"SELECT 1, NULL, max(seq){pad} FROM ranking_pointer_changes WHERE owner = ? AND scope_key = ?")
        params += [owner, scope_key, owner, scope_key]
        if memory_revision:
            branches.append(f"SELECT 3, NULL, revision{pad} FROM memory_revisions WHERE owner = ?")
            params.append(owner)
        head = newest = op = revision = None
        for kind, head_op, seq, *row in self.conn.fetchall(" UNION ALL ".join(branches), params):
            kind = int(kind)
            if kind == 0:
                head = (head_op, None if seq is None else int(seq))
            elif kind == 1:
                newest = None if seq is None else int(seq)
            elif kind == 2:
                op = row_operation(row)
            else:
                revision = int(seq)
        return PointerRead(head, newest, op, revision)

    def pointer_position(self, owner: str, scope_key: str) -> tuple[tuple[str, int | None] | None, int | None]:
        """In one statement: (operation id, log seq) named by the head row of (owner, scope key),
        and the log seq of the newest entry of the append-only change index; None where there is
        no such row."""
        read = self.pointer_read(owner, scope_key)
        return read.head, read.newest

    def pointer_position_and_operation(
        self, owner: str, scope_key: str, op_id: str
    ) -> tuple[tuple[str, int | None] | None, int | None, StoredOperation | None]:
        """``pointer_position`` and, in the same statement, operation ``op_id`` from the log
        (unverified; None when absent): a reader that expects the head to still name ``op_id``
        reads the head and that change in one round trip instead of two."""
        read = self.pointer_read(owner, scope_key, op_id)
        return read.head, read.newest, read.operation

    def write_pointer_head(self, owner: str, scope_key: str, op: StoredOperation) -> None:
        """Point the head row of (owner, scope key) at a stored pointer change."""
        self.conn.execute(
            "INSERT INTO ranking_pointer_heads (owner, scope_key, op_id, op_seq, payload, checksum) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (owner, scope_key) DO UPDATE SET op_id = excluded.op_id, "
            "op_seq = excluded.op_seq, payload = excluded.payload, checksum = excluded.checksum",
            [owner, scope_key, op.id, op.seq, op.payload, op.checksum],
        )

    def delete_pointer_head(self, owner: str, scope_key: str) -> None:
        self.conn.execute("DELETE FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ?", [owner, scope_key])

    def index_pointer_change(self, op: StoredOperation) -> None:
        """Add a stored pointer change to the append-only change index (same transaction)."""
        self.conn.execute(
            "INSERT INTO ranking_pointer_changes (owner, scope_key, seq, op_id) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [op.owner, op.scope_key, op.seq, op.id],
        )
