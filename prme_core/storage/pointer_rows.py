"""Profile pointer heads in a store session: the derived index of each scope set's newest change."""

from __future__ import annotations

from prme_core.storage.operation_log import row_operation
from prme_core.storage.records import StoredOperation
from prme_core.storage.sql import OPERATION_COLUMNS, SessionBase

_OP_SELECT = ", ".join(OPERATION_COLUMNS)
_NO_OP = ", ".join(["NULL"] * len(OPERATION_COLUMNS))


class PointerRows(SessionBase):
    """The pointer head rows and the pointer-change index."""

    def pointer_position(self, owner: str, scope_key: str) -> tuple[tuple[str, int | None] | None, int | None]:
        """In one statement: (operation id, log seq) named by the head row of (owner, scope key),
        and the log seq of the newest entry of the append-only change index; None where there is
        no such row."""
        rows = self.conn.fetchall(
            "SELECT 0, op_id, op_seq FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ? UNION ALL "
            "SELECT 1, NULL, max(seq) FROM ranking_pointer_changes WHERE owner = ? AND scope_key = ?",
            [owner, scope_key, owner, scope_key],
        )
        head, newest = None, None
        for kind, op_id, seq in rows:
            if int(kind) == 0:
                head = (op_id, None if seq is None else int(seq))
            elif seq is not None:
                newest = int(seq)
        return head, newest

    def pointer_position_and_operation(
        self, owner: str, scope_key: str, op_id: str
    ) -> tuple[tuple[str, int | None] | None, int | None, StoredOperation | None]:
        """``pointer_position`` and, in the same statement, operation ``op_id`` from the log
        (unverified; None when absent): a reader that expects the head to still name ``op_id``
        reads the head and that change in one round trip instead of two. The operation is looked
        up by id alone (see ``operation_at``)."""
        rows = self.conn.fetchall(
            # The typed branch first: PostgreSQL types a UNION's NULL columns from the branches before.
            f"SELECT 2, NULL, NULL, {_OP_SELECT} FROM operations WHERE id = ? "
            f"UNION ALL SELECT 0, op_id, op_seq, {_NO_OP} FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ? "
            f"UNION ALL SELECT 1, NULL, max(seq), {_NO_OP} FROM ranking_pointer_changes "
            "WHERE owner = ? AND scope_key = ?",
            [op_id, owner, scope_key, owner, scope_key],
        )
        head, newest, op = None, None, None
        for kind, head_op, seq, *row in rows:
            if int(kind) == 0:
                head = (head_op, None if seq is None else int(seq))
            elif int(kind) == 1:
                newest = None if seq is None else int(seq)
            else:
                op = row_operation(row)
        return head, newest, op

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
