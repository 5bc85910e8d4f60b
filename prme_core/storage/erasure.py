"""Erasure in a store session: deleting one memory or every row of an owner, and the deletion
records that stay behind (ids and content hashes, never content).

The memory and log tables are append-only; on PostgreSQL a trigger refuses every UPDATE and
DELETE on them. An erasure is the one act that may remove rows: it sets the transaction-local
``prme.erasing`` flag, which the trigger (migration 7) lets DELETE through, and clears it again
before it returns, so nothing else in the transaction can delete. The deletion records
themselves are append-only without exception.
"""

from __future__ import annotations

from prme_core.canonical import canonical_json, sha256_hex
from prme_core.storage.sql import SessionBase
from prme_core.types import to_epoch_us, utc_now

OWNER_TABLES = (
    "memory_nodes",
    "memory_node_versions",
    "memory_edges",
    "operations",
    "receipt_projections",
    "ranking_pointer_heads",
    "ranking_pointer_changes",
    "memory_revisions",
    "node_refs",
)
"""Every table with an ``owner`` column except ``deletions``: what forgetting an owner empties."""

DELETION_COLUMNS = ("seq", "owner", "kind", "target_id", "record", "checksum", "actor", "deleted_us")


class ErasureRows(SessionBase):
    """Deleting memories and owners, and reading the deletion records."""

    def _erasing(self, on: bool) -> None:
        if self.backend == "postgresql":
            self.conn.execute(f"SET LOCAL prme.erasing = '{'on' if on else 'off'}'")

    def erase_memory(self, owner: str, node_id: str) -> list[tuple[int, str]]:
        """Delete every version of one memory and every edge touching it; return the (version,
        content hash) pairs removed, oldest first (empty: the owner has no such memory). Its node
        reference stays (an id and a number, never content): stored pools and projections that
        name the memory by it keep resolving, so its receipts still verify and replay."""
        versions = [
            (int(v), h)
            for v, h in self.conn.fetchall(
                "SELECT version, content_hash FROM memory_node_versions WHERE owner = ? AND id = ? ORDER BY version",
                [owner, node_id],
            )
        ]
        if not versions:
            return []
        self._erasing(True)
        try:
            self.conn.execute("DELETE FROM memory_node_versions WHERE owner = ? AND id = ?", [owner, node_id])
            self.conn.execute("DELETE FROM memory_nodes WHERE owner = ? AND id = ?", [owner, node_id])
            self.conn.execute(
                "DELETE FROM memory_edges WHERE owner = ? AND (source_id = ? OR target_id = ?)",
                [owner, node_id, node_id],
            )
        finally:
            self._erasing(False)
        self._memory_written.add(owner)
        return versions

    def erase_owner(self, owner: str) -> dict[str, int]:
        """Delete every row naming ``owner`` (but its deletion records); return the rows removed per table."""
        # on a folded store receipt_projections is a view over the receipts' operations rows: its
        # rows are counted first and go with the operations
        folded = "receipt_projections" if self.receipts_folded else None
        viewed = self.conn.fetchall(f"SELECT count(*) FROM {folded} WHERE owner = ?", [owner])[0][0] if folded else 0
        self._erasing(True)
        try:  # each DELETE answers how many rows it removed
            counts = {
                table: viewed if table == folded else self.conn.execute(f"DELETE FROM {table} WHERE owner = ?", [owner])
                for table in OWNER_TABLES
            }
        finally:
            self._erasing(False)
        self._memory_written.discard(owner)  # its revision row is gone; the deletion record keeps the floor
        return counts

    def insert_deletion(
        self, owner: str, kind: str, target_id: str | None, record: dict, actor: str, revision_floor: int
    ) -> tuple[int, str, int]:
        """Append one deletion record; return its (seq, checksum, deleted_us)."""
        body = canonical_json(record)
        checksum = sha256_hex(body)
        deleted_us = to_epoch_us(utc_now())
        ((seq,),) = self.conn.fetchall(
            "INSERT INTO deletions (owner, kind, target_id, record, checksum, actor, deleted_us, revision_floor) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
            [owner, kind, target_id, body.decode("utf-8"), checksum, actor, deleted_us, revision_floor],
        )
        return int(seq), checksum, deleted_us

    def deletion_rows(self, owner: str) -> list[tuple]:
        """The owner's deletion records, oldest first (``DELETION_COLUMNS`` order)."""
        return self.conn.fetchall(
            f"SELECT {', '.join(DELETION_COLUMNS)} FROM deletions WHERE owner = ? ORDER BY seq", [owner]
        )
