"""Receipt projections in a store session: the columnar rows the learning snapshot reads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prme_core.storage.sql import PROJECTION_COLUMNS, SessionBase


class ReceiptRows(SessionBase):
    """Receipt projection and packed-pool rows."""

    def receipt_projection_rows(self, owner: str, request_ids: Sequence[str]) -> Iterable[tuple]:
        """Packed projection rows of receipts, streamed (column order: see receipts.store); the
        pool digest is '' and the pool flags 0 before version 11. The pools themselves are read by
        ``receipt_pool_rows``."""
        for chunk in self._id_batches(request_ids):
            with self.conn.id_filter("request_id", chunk) as (where, extra):
                for batch in self.conn.stream_arrow(
                    "SELECT request_id, receipt_checksum, schema_version, scope_key, query, ranking_policy, fusion, "
                    "candidate_count, int_columns, float_columns, node_ids, base_node_ids, adjustments, "
                    "coalesce(pool_sha256, '') AS pool_sha256, coalesce(pool_flags, 0) AS pool_flags "
                    f"FROM receipt_projections WHERE owner = ? AND {where}",
                    [owner, *extra],
                ):
                    yield from zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)))

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
