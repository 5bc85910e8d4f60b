"""Persisting and reading receipts: one append-only operation plus its projection, atomically
(one row on a store that folds them, ``storage.sql.FOLDED_PROJECTION_COLUMNS``).

The operation's payload is the receipt's canonical bytes and its checksum is the receipt
checksum that feedback records bind to. In the same transaction the receipt's candidate
projection row is written for fast, digest-verified learning reads. ``write_receipts`` does the
same for many receipts with one multi-row statement per table (bulk loads, benchmarks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import ValidationError

from prme_core.canonical import canonical_json, sha256_hex
from prme_core.errors import CorruptRecord, DuplicateKey, IdempotencyConflict, InvalidInput, MissingEvidence
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.pool import PoolColumns, PoolSummary, pool_digest
from prme_core.receipts.projection import packed_projection, scope_key
from prme_core.receipts.stored_pool import packed_from_stored, stored_pool
from prme_core.storage.base import Store
from prme_core.storage.compression import stored_float_block
from prme_core.storage.records import OperationDraft, StoredOperation
from prme_core.storage.session import StoreSession
from prme_core.storage.sql import PROJECTION_HEADER_COLUMNS
from prme_core.types import from_epoch_us

OP_RECEIPT = "retrieval_receipt"


def receipt_operation_id(owner: str, request_id: UUID) -> str:
    return str(uuid5(NAMESPACE_URL, canonical_json(["prme:receipt:v1", owner, str(request_id)]).decode()))


def retention_lock(owner: str) -> str:
    """The lock a retention pass and every feedback write of an owner take."""
    return f"prme:receipt-retention:{owner}"


def refuse_if_dropped(tx: StoreSession, owner: str, request_id: str) -> None:
    """Inside a feedback write: take the owner's retention lock and refuse a receipt whose pool
    retention dropped (its labels could never be learned from)."""
    tx.lock(retention_lock(owner))
    dropped = tx.pool_dropped_at(owner, request_id)
    if dropped is not None:
        raise InvalidInput(
            "request_id",
            f"retrieval {request_id} had no feedback within the retention window, so its scored pool was dropped "
            f"at {from_epoch_us(dropped).isoformat()}; feedback is taken only on retrievals inside the window",
        )


def receipt_bytes(receipt: RetrievalReceipt) -> bytes:
    return receipt.canonical_bytes()


def _draft(receipt: RetrievalReceipt, backend: str, payload: bytes | None = None) -> OperationDraft:
    return OperationDraft(
        id=receipt_operation_id(receipt.owner, receipt.request_id),
        owner=receipt.owner,
        op_type=OP_RECEIPT,
        payload=payload if payload is not None else receipt_bytes(receipt),
        scope_key=scope_key(receipt.scopes),
        target_id=str(receipt.request_id),
        compressed=backend in COMPRESSED_RECEIPT_BACKENDS,
    )


def _projection_row(receipt: RetrievalReceipt, checksum: str, backend: str) -> tuple:
    """The receipt's ``receipt_projections`` row (``storage.session.PROJECTION_COLUMNS`` order)."""
    packed = packed_projection(receipt)
    return (
        receipt.owner,
        str(receipt.request_id),
        checksum,
        *(packed.header[c] for c in PROJECTION_HEADER_COLUMNS),
        packed.int_columns,
        stored_float_block(packed.float_columns) if backend in COMPRESSED_FLOAT_BACKENDS else packed.float_columns,
        packed.node_ids,
        packed.base_node_ids,
        packed.adjustments,
        packed.header.get("pool_sha256"),
        packed.header.get("pool_flags"),
        _stored(receipt.packed_pool(), backend),
    )


COMPRESSED_POOL_BACKENDS = frozenset({"postgresql"})
"""Where a pool is stored compressed by ``stored_pool``. Measured at 10,000 memories
(``benchmarks/retrieval.py``, bytes on disk per retrieval after a vacuum): PostgreSQL 34.9 KB
with the packed pool as is, 33.2 KB compressed; DuckDB 15.7 KB as is — its own column
compression does better on the packed bytes than zlib does — and 25.8 KB compressed. Reads
accept both forms on either backend (``packed_from_stored``)."""


COMPRESSED_RECEIPT_BACKENDS = frozenset({"postgresql"})
"""Where a receipt's canonical bytes are stored compressed (``operations.payload_z``, migration 9)
rather than as JSON text. Measured at 10,000 memories (``benchmarks/retrieval.py``, on disk after
a vacuum): PostgreSQL keeps the ~29 KB text as ~8.6 KB (its TOAST compression) against ~5.5 KB
compressed here; DuckDB keeps it as ~3.1 KB (its column compression spans rows) against
~5.7 KB. Reads accept both forms on either backend."""

COMPRESSED_FLOAT_BACKENDS = frozenset({"duckdb", "postgresql"})
"""Where a projection's float block (~11 KB of float64 at limit 50) is stored compressed
(``storage.compression.stored_float_block``): DuckDB keeps it as is in ~4.4 KB, compressed in
~0.7 KB; PostgreSQL ~1.0 KB as is (TOAST), ~0.7 KB compressed."""


def _stored(packed: bytes | None, backend: str) -> bytes | None:
    if packed is None:
        return None
    return stored_pool(packed) if backend in COMPRESSED_POOL_BACKENDS else packed


def write_receipt(tx: StoreSession, receipt: RetrievalReceipt, payload: bytes | None = None) -> StoredOperation:
    """Append the receipt and its candidate projection inside an open transaction.

    Request ids are fresh server UUIDs, so the receipt is inserted without a conflict clause
    (which costs DuckDB more than the insert); a reused id fails the transaction instead.
    """
    draft = _draft(receipt, tx.backend, payload)
    try:
        return tx.append_receipt(draft, _projection_row(receipt, draft.checksum, tx.backend))
    except DuplicateKey:
        raise IdempotencyConflict(f"request id {receipt.request_id} already has a stored receipt") from None


def write_receipts(tx: StoreSession, receipts: Sequence[RetrievalReceipt]) -> list[str]:
    """``write_receipt`` for many receipts inside an open transaction: bounded multi-row inserts,
    one per table per chunk, instead of two statements per receipt. Returns their checksums in
    order. A request id that is stored already, or repeated in ``receipts``, fails the
    transaction (``IdempotencyConflict``)."""
    drafts = [_draft(receipt, tx.backend) for receipt in receipts]
    try:
        tx.append_receipts(drafts, [_projection_row(r, d.checksum, tx.backend) for r, d in zip(receipts, drafts)])
    except DuplicateKey:
        raise IdempotencyConflict(
            "a request id of these receipts already has a stored receipt (or repeats "
            "within the batch); nothing of the batch is kept once the transaction ends"
        ) from None
    return [d.checksum for d in drafts]


def persist_receipt(store: Store, receipt: RetrievalReceipt) -> StoredOperation:
    """``write_receipt`` in a transaction of its own (one statement where the store folds the
    projection into the receipt's row)."""
    with store.transaction(single_write=store.folds_receipts) as tx:
        return write_receipt(tx, receipt)


def parse_receipt(op: StoredOperation, owner: str) -> RetrievalReceipt:
    """Parse a verified receipt operation; identity and re-serialized checksum must match."""
    try:
        receipt = RetrievalReceipt.model_validate_json(op.payload)
    except ValidationError as exc:
        raise CorruptRecord(f"stored receipt {op.target_id} no longer validates: {exc.errors()[0]['msg']}") from exc
    if receipt.owner != owner or str(receipt.request_id) != op.target_id:
        raise CorruptRecord(f"stored receipt {op.target_id}: owner or request identity mismatch")
    if sha256_hex(receipt_bytes(receipt)) != op.checksum:
        raise CorruptRecord(f"stored receipt {op.target_id}: canonical bytes do not reproduce its checksum")
    return receipt


def get_receipt(
    store: Store, owner: str, request_id: UUID, *, with_pool: bool = False
) -> tuple[RetrievalReceipt, str] | None:
    """(receipt, checksum) for the owner's request id, or None when missing or foreign. With
    ``with_pool`` a version-11 receipt comes bound to its packed pool (digest verified)."""
    with store.transaction() as tx:
        op = tx.find_operation(owner, OP_RECEIPT, str(request_id))
        rows = list(tx.receipt_pool_rows(owner, [str(request_id)])) if op is not None and with_pool else []
        dropped = tx.pool_dropped_at(owner, str(request_id)) if op is not None and with_pool and not rows else None
    if op is None:
        return None
    receipt = parse_receipt(op, owner)
    if with_pool and isinstance(receipt.pool, PoolSummary):
        if not rows and dropped is not None:
            raise MissingEvidence(
                f"receipt {request_id} had no feedback within the retention window and its scored pool was dropped "
                f"at {from_epoch_us(dropped).isoformat()}; read it without with_pool (it still verifies and replays "
                "its returned list exactly)"
            )
        packed = _verified_pool(rows[0] if rows else None, str(request_id), op.checksum, receipt.pool.sha256)
        try:
            receipt.attach_pool(packed)
        except ValueError as exc:
            raise CorruptRecord(f"the packed pool of receipt {request_id} is inconsistent ({exc}); restore it") from exc
    return receipt, op.checksum


def _verified_pool(row: tuple | None, request_id: str, checksum: str, pool_sha256: str) -> bytes:
    """The packed pool of a stored row, checked against the receipt it must belong to."""
    if row is None:
        raise CorruptRecord(f"receipt {request_id} records a packed pool, but its pool row is missing; restore it")
    _, receipt_checksum, stored_sha, stored = row
    try:
        packed = packed_from_stored(bytes(stored))
    except ValueError as exc:
        raise CorruptRecord(f"the packed pool of receipt {request_id} is damaged ({exc}); restore it") from exc
    if receipt_checksum != checksum or stored_sha != pool_sha256 or pool_digest(packed) != pool_sha256:
        raise CorruptRecord(f"the packed pool of receipt {request_id} does not match the receipt; restore it")
    return packed


def load_pool_columns(store: Store, owner: str, expected: Mapping[str, tuple[str, str]]) -> dict[str, PoolColumns]:
    """Packed pools of version-11 receipts, parsed and checked: ``expected`` maps each request id
    to (receipt checksum, pool digest) from already verified evidence (a snapshot's projections).
    A missing, foreign or changed pool raises ``CorruptRecord``; nothing degrades to a guess."""
    found: dict[str, PoolColumns] = {}
    with store.transaction(read_only=True) as tx:
        rows = {row[0]: row for row in tx.receipt_pool_rows(owner, list(expected))}
    for request_id, (checksum, pool_sha256) in expected.items():
        packed = _verified_pool(rows.get(request_id), request_id, checksum, pool_sha256)
        try:
            found[request_id] = PoolColumns.unpack(packed)
        except ValueError as exc:
            raise CorruptRecord(f"the packed pool of receipt {request_id} is malformed ({exc}); restore it") from exc
    return found


def get_receipts(store: Store, owner: str, request_ids: Sequence[UUID]) -> dict[UUID, tuple[RetrievalReceipt, str]]:
    """Receipts by request id (batched reads); missing ids are simply absent from the result."""
    with store.transaction() as tx:
        ops = tx.find_operations(owner, OP_RECEIPT, [str(r) for r in request_ids])
    return {UUID(k): (parse_receipt(op, owner), op.checksum) for k, op in ops.items()}
