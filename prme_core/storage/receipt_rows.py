"""Receipt projections in a store session: the columnar rows the learning snapshot reads.

Where the owner's node references are kept (``REF_BACKENDS``), a projection's candidate ids and
a stored pool's member and outside ids are written as node references (``node_refs``, migration
10) instead of 36-character texts and 16-byte UUIDs: the bulk of a retrieval's bytes on disk.
Reads resolve them within the owner and hand back exactly the text and pool form written, before
any digest is checked; a reference the owner does not hold fails closed (``CorruptRecord``)."""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from prme_core.errors import CorruptRecord
from prme_core.storage.compression import (
    NO_NODE,
    float_block_from_stored,
    node_ids_of,
    node_refs_of,
    pack_refs,
    unpack_refs,
    with_node_ids,
    with_node_refs,
)
from prme_core.storage.node_rows import NodeRows
from prme_core.storage.operation_log import NEW_OPERATION_MARKS, OperationLog, operation_values, written_operation
from prme_core.storage.records import OperationDraft, StoredOperation
from prme_core.storage.schema import PACKED_HEAD_FIELDS, PACKED_TEXT_FIELDS
from prme_core.storage.sql import (
    FOLDED_PROJECTION_COLUMNS,
    NEW_OPERATION_COLUMNS,
    PROJECTION_COLUMNS,
    SessionBase,
    _placeholders,
)
from prme_core.types import to_epoch_us, utc_now

_FLOATS = 9  # the float block's place in a projection row as read
_TEXTS = (10, 11)  # node_ids and base_node_ids in a projection row as read
_NODE_IDS, _BASE_IDS, _POOL = (PROJECTION_COLUMNS.index(c) for c in ("node_ids", "base_node_ids", "pool"))

REF_BACKENDS = frozenset({"postgresql"})
"""Where projections and stored pools name nodes by reference. Measured at 10,000 memories
(300 retrievals as ``benchmarks/retrieval.py`` makes them, bytes on disk per retrieval after VACUUM
FULL): PostgreSQL 28.8 KB with the ids as texts and UUIDs, 12.7 KB by reference (the stored pool
14.5 KB → 3.0 KB, the candidate id texts 3.6 KB → 0.2 KB). DuckDB keeps the packed pool as is
(its own compression does better there) and is under the 15 KB target without."""
TEXT_REFS_PREFIX = "refs1:"
"""A projection's ``node_ids`` stored as references: this prefix, then base64 of the candidate
count (uint32) and ``pack_refs`` of the node ids' references followed by the base node ids' (an
empty id as ``NO_NODE``); its ``base_node_ids`` is then empty. A stored id text starts with a hex
digit or is empty, so the two never meet."""


class ReceiptRows(SessionBase):
    """Receipt projection and packed-pool rows."""

    def receipt_projection_rows(self, owner: str, request_ids: Sequence[str]) -> Iterable[tuple]:
        """Packed projection rows of receipts, streamed (column order: see receipts.store); the
        pool digest is '' and the pool flags 0 before version 11, a float block stored compressed
        comes back inflated and ids stored as node references as the texts they stand for. The
        pools themselves are read by ``receipt_pool_rows``."""
        for chunk in self._id_batches(request_ids):
            with self.conn.id_filter("request_id", chunk) as (where, extra):
                for columns in self._resolved_batches(
                    owner,
                    "SELECT request_id, receipt_checksum, schema_version, scope_key, query, ranking_policy, fusion, "
                    "candidate_count, int_columns, float_columns, node_ids, base_node_ids, adjustments, "
                    "coalesce(pool_sha256, '') AS pool_sha256, coalesce(pool_flags, 0) AS pool_flags "
                    f"FROM receipt_projections WHERE owner = ? AND {where}",
                    [owner, *extra],
                    _stored_texts,
                    _resolve_texts,
                ):
                    columns[_FLOATS] = [
                        float_block_from_stored(block, f"the projection of receipt {request_id}")
                        for request_id, block in zip(columns[0], columns[_FLOATS])
                    ]
                    yield from zip(*columns)

    def receipt_pool_rows(self, owner: str, request_ids: Sequence[str]) -> Iterable[tuple[str, str, str, bytes]]:
        """(request id, receipt checksum, pool digest, stored pool) of version-11 receipts,
        streamed, in the form ``receipts.stored_pool`` wrote (node references resolved); receipts
        without a packed pool are absent."""
        for chunk in self._id_batches(request_ids):
            with self.conn.id_filter("request_id", chunk) as (where, extra):
                for columns in self._resolved_batches(
                    owner,
                    "SELECT request_id, receipt_checksum, pool_sha256, pool FROM receipt_projections "
                    f"WHERE owner = ? AND pool IS NOT NULL AND {where}",
                    [owner, *extra],
                    _stored_pools,
                    _resolve_pools,
                ):
                    yield from zip(*columns)

    def append_receipt(self, draft: OperationDraft, projection: tuple) -> StoredOperation:
        """Append a receipt's operation (its id known to be new) and its projection row
        (``PROJECTION_COLUMNS`` order, for the same owner and request id): one INSERT where the
        store folds them (``receipts_folded``), else the operation and then the projection. A
        duplicate id raises ``DuplicateKey`` and the transaction must end."""
        if not self.receipts_folded:
            stored = OperationLog.insert_new_operation(self, draft)
            self.insert_receipt_projections([projection])
            return stored
        if self.backend in REF_BACKENDS:
            (projection,) = self._by_reference([projection])
        admitted = to_epoch_us(utc_now())
        seq = self.conn.fetchall(
            f"INSERT INTO operations ({_FOLDED_NAMES}) VALUES ({NEW_OPERATION_MARKS}, {_FOLDED_MARKS}) RETURNING seq",
            [*operation_values(draft, admitted), *_folded(draft, projection)],
        )[0][0]
        return written_operation(draft, seq, admitted)

    def append_receipts(self, drafts: Sequence[OperationDraft], projections: Sequence[tuple]) -> None:
        """``append_receipt`` for many receipts, in bounded multi-row statements."""
        if not self.receipts_folded:
            OperationLog.insert_new_operations(self, drafts)
            self.insert_receipt_projections(projections)
            return
        if self.backend in REF_BACKENDS:
            projections = self._by_reference(projections)
        admitted = to_epoch_us(utc_now())
        self.conn.bulk_insert(
            "operations",
            (*NEW_OPERATION_COLUMNS, *FOLDED_PROJECTION_COLUMNS),
            [(*operation_values(d, admitted), *_folded(d, p)) for d, p in zip(drafts, projections, strict=True)],
        )

    def insert_receipt_projections(self, rows: Sequence[tuple]) -> None:
        """Packed candidate projections of receipts: one row per receipt, in ``PROJECTION_COLUMNS``
        order (``receipts.store`` builds them); ids stored as node references where the backend
        keeps them and every id has one (a row naming a node without one is stored as it came).
        A folded store takes projections only with their receipts (``append_receipt``)."""
        if self.receipts_folded:
            raise RuntimeError("this store keeps a projection in its receipt's row: write both with append_receipt")
        if self.backend in REF_BACKENDS:
            rows = self._by_reference(rows)
        self.conn.bulk_insert("receipt_projections", PROJECTION_COLUMNS, rows)

    # --- node references in projections and pools ---------------------------------------------

    def _by_reference(self, rows: Sequence[tuple]) -> list[tuple]:
        out = list(rows)
        for owner in {row[0] for row in rows}:
            at = [i for i, row in enumerate(rows) if row[0] == owner]
            pools = {i: _pool_ids(rows[i][_POOL]) for i in at}
            texts = {i: (_id_texts(rows[i][_NODE_IDS]), _id_texts(rows[i][_BASE_IDS])) for i in at}
            wanted = {t for i in at for t in (*texts[i][0], *texts[i][1], *(pools[i][0] if pools[i] else ()))}
            refs = {**NodeRows.node_refs(self, owner, wanted - {""}), "": NO_NODE}
            for i in at:
                row = list(rows[i])
                nodes, bases = texts[i]
                if nodes and len(bases) == len(nodes) and all(t in refs for t in (*nodes, *bases)):
                    row[_NODE_IDS], row[_BASE_IDS] = _texts_by_reference([refs[t] for t in (*nodes, *bases)]), ""
                if pools[i] is not None and all(t in refs for t in pools[i][0]):
                    row[_POOL] = with_node_refs(np.array([refs[t] for t in pools[i][0]], dtype=np.int64), pools[i][1])
                out[i] = tuple(row)
        return out

    def _resolved_batches(
        self,
        owner: str,
        sql: str,
        params: list,
        stored: Callable[[list[list]], dict[int, tuple[np.ndarray, Any]]],
        resolve: Callable[[list[list], dict[int, tuple[np.ndarray, Any]], Mapping[int, str]], None],
    ) -> Iterator[list[list]]:
        """The query's rows in batches of columns, with what ``stored`` finds stored as node
        references (row → (refs, rest)) resolved in place by ``resolve``. DuckDB runs no query
        while a result is open, so from the first batch that names references on, the rest of
        the result is read before the references are looked up (in their stored form, a few
        KB a row)."""
        reader = iter(self.conn.stream_arrow(sql, params))
        for batch in reader:
            columns = _columns(batch)
            try:
                found = stored(columns)
            except CorruptRecord:
                for _ in reader:  # close the result before the error leaves the transaction
                    pass
                raise
            if not found:
                yield columns
                continue
            pending = [(columns, found)] + [(c, stored(c)) for c in [_columns(b) for b in reader]]
            for columns, found in pending:
                if found:
                    resolve(columns, found, self._names(owner, np.concatenate([r for r, _ in found.values()])))
                yield columns
            return

    def _names(self, owner: str, refs: np.ndarray) -> Mapping[int, str]:
        """The id text each of the owner's ``refs`` stands for (``NO_NODE``: the empty text); a
        reference the owner does not hold raises ``CorruptRecord``."""
        wanted = sorted({int(r) for r in refs} - {NO_NODE})
        names: dict[int, str] = {NO_NODE: "", **NodeRows.node_ids_of_refs(self, owner, wanted)}
        missing = [r for r in wanted if r not in names]
        if missing:
            raise CorruptRecord(
                f"receipts of {owner} name node reference {missing[0]}, which none of the owner's memories holds "
                f"({len(missing)} such references); restore the node_refs rows or the receipts from a backup"
            )
        return names

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
                    "UPDATE operations SET rp_pool = NULL, rp_pool_dropped_us = ? "
                    f"WHERE owner = ? AND rp_pool IS NOT NULL AND rp_head IS NOT NULL AND target_id IN ({marks})"
                    if self.receipts_folded
                    else "UPDATE receipt_projections SET pool = NULL, pool_dropped_us = ? "
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


_FOLDED_NAMES = ", ".join((*NEW_OPERATION_COLUMNS, *FOLDED_PROJECTION_COLUMNS))
_FOLDED_MARKS = _placeholders(len(FOLDED_PROJECTION_COLUMNS))


def _folded(draft: OperationDraft, projection: tuple) -> tuple:
    """A projection row's values in ``FOLDED_PROJECTION_COLUMNS`` order, checked to name the
    draft's owner, request, checksum and scope key (the operations row keeps them once)."""
    row = dict(zip(PROJECTION_COLUMNS, projection, strict=True))
    if (row["owner"], row["request_id"]) != (draft.owner, draft.target_id):
        raise ValueError(f"the projection of {row['request_id']} belongs to another receipt than operation {draft.id}")
    if (row["receipt_checksum"], row["scope_key"]) != (draft.checksum, draft.scope_key):
        raise ValueError(f"the projection of {row['request_id']} names another checksum or scope than its receipt")
    return packed_projection_values(row)


def packed_projection_values(row: Mapping[str, Any]) -> tuple:
    """A projection row (``PROJECTION_COLUMNS`` names) as the values of ``FOLDED_PROJECTION_COLUMNS``:
    the header fields as one JSON object, the candidate texts joined by a newline (refused if
    one holds a newline), the blocks and the pool as they are."""
    texts = [row[name] for name in PACKED_TEXT_FIELDS]
    if any("\n" in text for text in texts):
        raise ValueError(f"a candidate text of the projection of {row['request_id']} holds a newline")
    head = orjson.dumps({name: row[name] for name in PACKED_HEAD_FIELDS}).decode()
    return head, "\n".join(texts), row["int_columns"], row["float_columns"], row["pool"]


def _columns(batch: Any) -> list[list]:
    return [batch.column(i).to_pylist() for i in range(batch.num_columns)]


def _stored_texts(columns: list[list]) -> dict[int, tuple[np.ndarray, None]]:
    return {
        i: (_text_refs(text, request_id), None)
        for i, (request_id, text) in enumerate(zip(columns[0], columns[_TEXTS[0]]))
        if text.startswith(TEXT_REFS_PREFIX)
    }


def _resolve_texts(columns: list[list], found: dict[int, tuple[np.ndarray, None]], names: Mapping[int, str]) -> None:
    for i, (refs, _) in found.items():
        texts = [names[int(r)] for r in refs]
        half = len(texts) // 2
        columns[_TEXTS[0]][i], columns[_TEXTS[1]][i] = "\x1f".join(texts[:half]), "\x1f".join(texts[half:])


def _stored_pools(columns: list[list]) -> dict[int, tuple[np.ndarray, bytes]]:
    found = {}
    for i, (request_id, pool) in enumerate(zip(columns[0], columns[3])):
        refs = node_refs_of(bytes(pool), f"the stored pool of receipt {request_id}") if pool else None
        if refs is not None:
            found[i] = refs
    return found


def _resolve_pools(columns: list[list], found: dict[int, tuple[np.ndarray, bytes]], names: Mapping[int, str]) -> None:
    for i, (refs, body) in found.items():
        try:
            ids = b"".join(bytes.fromhex(names[int(r)].replace("-", "")) for r in refs)
        except ValueError:
            ids = b""
        if len(ids) != 16 * len(refs):
            raise CorruptRecord(
                f"the stored pool of receipt {columns[0][i]} names nodes by references that do not resolve to "
                "node ids; restore the node_refs rows or the receipt from a backup"
            )
        columns[3][i] = with_node_ids(ids, body)


def _id_texts(text: str) -> list[str]:
    return text.split("\x1f") if text else []


def _pool_ids(pool: bytes | None) -> tuple[list[str], bytes] | None:
    """The member and outside ids (as texts) and body of a pool stored with its ids beside it."""
    try:
        found = node_ids_of(bytes(pool)) if pool is not None else None
    except ValueError:
        return None  # not ours to judge here; the read checks it against the receipt's digest
    if found is None:
        return None
    ids, body = found
    return _uuid_texts(ids), body


def _uuid_texts(ids: bytes) -> list[str]:
    """16-byte UUIDs as their canonical texts (``str(UUID)``), formatted in one pass."""
    digits = np.frombuffer(ids.hex().encode("ascii"), dtype="S1").reshape(-1, 32)
    dash = np.full((digits.shape[0], 1), b"-", dtype="S1")
    parts = (digits[:, :8], dash, digits[:, 8:12], dash, digits[:, 12:16], dash, digits[:, 16:20], dash, digits[:, 20:])
    text = np.hstack(parts).tobytes().decode("ascii")
    return [text[i : i + 36] for i in range(0, len(text), 36)]


def _texts_by_reference(refs: list[int]) -> str:
    packed = pack_refs(np.array(refs, dtype=np.int64))
    return TEXT_REFS_PREFIX + base64.b64encode(struct.pack("<I", len(refs) // 2) + packed).decode("ascii")


def _text_refs(text: str, request_id: str) -> np.ndarray:
    what = f"the projection of receipt {request_id}"
    try:
        raw = base64.b64decode(text[len(TEXT_REFS_PREFIX) :], validate=True)
        (count,) = struct.unpack_from("<I", raw, 0)
    except (binascii.Error, struct.error) as exc:
        raise CorruptRecord(f"{what} stores its ids as node references that do not decode ({exc}); restore it") from exc
    return unpack_refs(raw[4:], 2 * count, what)
