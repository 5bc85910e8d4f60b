"""Receipt projections in a store session: the columnar rows the learning snapshot reads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prme_core.storage.compression import float_block_from_stored
from prme_core.storage.sql import PROJECTION_COLUMNS, SessionBase, _placeholders

_FLOATS = 9  # the float block's place in a projection row as read


class ReceiptRows(SessionBase):
    """Receipt projection and packed-pool rows."""

    def receipt_projection_rows(self, owner: str, request_ids: Sequence[str]) -> Iterable[tuple]:
        """Packed projection rows of receipts, streamed (column order: see receipts.store); the
        pool digest is '' and the pool flags 0 before version 11, and a float block stored
        compressed comes back inflated. The pools themselves are read by ``receipt_pool_rows``."""
        for chunk in self._id_batches(request_ids):
            with self.conn.id_filter("request_id", chunk) as (where, extra):
                for batch in self.conn.stream_arrow(
                    "SELECT request_id, receipt_checksum, schema_version, scope_key, query, ranking_policy, fusion, "
                    "candidate_count, int_columns, float_columns, node_ids, base_node_ids, adjustments, "
                    "coalesce(pool_sha256, '') AS pool_sha256, coalesce(pool_flags, 0) AS pool_flags "
                    f"FROM receipt_projections WHERE owner = ? AND {where}",
                    [owner, *extra],
                ):
                    columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
                    columns[_FLOATS] = [
                        float_block_from_stored(block, f"the projection of receipt {request_id}")
                        for request_id, block in zip(columns[0], columns[_FLOATS])
                    ]
                    yield from zip(*columns)

    def receipt_pool_rows(self, owner: str, request_ids: Sequence[str]) -> Iterable[tuple[str, str, str, bytes]]:
        """(request id, receipt checksum, pool digest, packed pool) of version-11 receipts, streamed;
        receipts without a packed pool are absent."""
        for chunk in self._id_batches(request_ids):
            with self.conn.id_filter("request_id", chunk) as (where, extra):
                for batch in self.conn.stream_arrow(
                    "SELECT request_id, receipt_checksum, pool_sha256, pool FROM receipt_projections "
                    f"WHERE owner = ? AND pool IS NOT NULL AND {where}",
                    [owner, *extra],
                ):
                    yield from zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)))

    def insert_receipt_projections(self, rows: Sequence[tuple]) -> None:
        """Packed candidate projections of receipts: one row per receipt, in ``PROJECTION_COLUMNS``
        order (``receipts.store`` builds them)."""
        self.conn.bulk_insert("receipt_projections", PROJECTION_COLUMNS, rows)

    # --- retention: dropping the pools of receipts nobody gave feedback on ----------------------

    def compactable_receipts(
        self, owner: str, *, receipt_op: str, feedback_ops: Sequence[str], before_us: int, limit: int
    ) -> list[str]:
        """Request ids (sorted, at most ``limit``) of the owner's receipts admitted before
        ``before_us`` that still hold a pool and that no record of ``feedback_ops`` names."""
        rows = self.conn.fetchall(
            "SELECT p.request_id FROM receipt_projections p JOIN operations o "
            "ON o.owner = p.owner AND o.op_type = ? AND o.target_id = p.request_id "
            "WHERE p.owner = ? AND p.pool IS NOT NULL AND o.admitted_us < ? AND NOT EXISTS ("
            "SELECT 1 FROM operations f WHERE f.owner = p.owner "
            f"AND f.op_type IN ({_placeholders(len(feedback_ops))}) "
            "AND CAST(f.payload AS JSON) ->> 'request_id' = p.request_id) "
            "ORDER BY p.request_id LIMIT ?",
            [receipt_op, owner, before_us, *feedback_ops, limit],
        )
        return [r[0] for r in rows]

    def drop_pools(self, owner: str, request_ids: Sequence[str], at_us: int) -> int:
        """Clear the stored pools of these receipts (recording when); return the bytes dropped."""
        dropped = 0
        if self.backend == "postgresql":
            self.conn.execute("SET LOCAL prme.compacting = 'on'")
        try:
            for chunk in self._id_batches(request_ids):
                marks = _placeholders(len(chunk))
                found = self.conn.fetchall(
                    "SELECT coalesce(sum(octet_length(pool)), 0) FROM receipt_projections "
                    f"WHERE owner = ? AND pool IS NOT NULL AND request_id IN ({marks})",
                    [owner, *chunk],
                )
                dropped += int(found[0][0] or 0)
                self.conn.execute(
                    "UPDATE receipt_projections SET pool = NULL, pool_dropped_us = ? "
                    f"WHERE owner = ? AND pool IS NOT NULL AND request_id IN ({marks})",
                    [at_us, owner, *chunk],
                )
        finally:
            if self.backend == "postgresql":
                self.conn.execute("SET LOCAL prme.compacting = 'off'")
        return dropped

    def pool_dropped_at(self, owner: str, request_id: str) -> int | None:
        """When retention dropped this receipt's pool (epoch µs), or None."""
        rows = self.conn.fetchall(
            "SELECT pool_dropped_us FROM receipt_projections WHERE owner = ? AND request_id = ?", [owner, request_id]
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def receipt_owners(self) -> list[str]:
        """Every owner with a stored receipt, sorted."""
        return [r[0] for r in self.conn.fetchall("SELECT DISTINCT owner FROM receipt_projections ORDER BY owner")]
