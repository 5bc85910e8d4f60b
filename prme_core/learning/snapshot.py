"""The feedback snapshot: one bounded cut of an owner's relevance records and their receipts.

The cut is one query for the owner's relevance records in admission order with
``LIMIT max_records + 1``: more rows than the bound fail (never truncate), and records admitted
after that query are simply not in the cut. The receipts the records reference are then
resolved in batches without parsing any receipt JSON: the database hashes each receipt payload
and compares it with the stored checksum, and the packed candidate projection read next must
reproduce the ``projection_sha256`` found inside that verified payload. Missing, ambiguous or
corrupt evidence raises; the snapshot never degrades to a partial one.

A snapshot is identified by ``snapshot_sha256`` over its record ids and checksums and its
receipt ids and checksums. ``SnapshotManifest`` carries exactly those ids, so a later step (or
another process) can reload the identical cut and verify it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any
from uuid import UUID

from pydantic import Field

from prme_core.canonical import canonical_digest
from prme_core.errors import AmbiguousRecord, CorruptRecord, InvalidInput, PrmeError
from prme_core.feedback.records import parse_record, record_operation_id
from prme_core.feedback.relevance import OP_RELEVANCE, RelevanceRecord
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.projection import PackedProjection, packed_projection
from prme_core.receipts.store import OP_RECEIPT
from prme_core.storage.base import Store
from prme_core.types import FrozenModel, Owner, Sha256Hex
from prme_core.validation import check_owner

DEFAULT_MAX_RECORDS = 10_000
MAX_RECORDS_BOUND = 100_000


class SnapshotTooLarge(PrmeError, ValueError):
    """The owner has more relevance records than ``max_records``; nothing was truncated."""


class MissingEvidence(PrmeError, LookupError):
    """A relevance record references a receipt that cannot be found for the owner."""


@dataclass(frozen=True)
class ReceiptEvidence:
    """A verified receipt as learning needs it: checksum plus its packed candidate projection."""

    request_id: UUID
    checksum: str
    projection: PackedProjection
    _arrays: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def header(self) -> dict[str, Any]:
        return self.projection.header

    def arrays(self) -> dict[str, Any]:
        if not self._arrays:
            self._arrays.update(self.projection.arrays())
        return self._arrays


class SnapshotManifest(FrozenModel):
    """Everything needed to reload and verify one cut (what Dagster steps pass along)."""

    owner: Owner
    max_records: int
    feedback_ids: tuple[UUID, ...]
    receipt_checksums: dict[str, Sha256Hex]
    snapshot_sha256: Sha256Hex


@dataclass(frozen=True)
class FeedbackSnapshot:
    owner: str
    max_records: int
    records: tuple[RelevanceRecord, ...]  # sorted by feedback id
    record_checksums: dict[UUID, str]
    receipts: dict[UUID, ReceiptEvidence]
    snapshot_sha256: str

    def manifest(self) -> SnapshotManifest:
        return SnapshotManifest(
            owner=self.owner, max_records=self.max_records, feedback_ids=tuple(r.feedback_id for r in self.records),
            receipt_checksums={str(k): v.checksum for k, v in sorted(self.receipts.items(), key=lambda kv: str(kv[0]))},
            snapshot_sha256=self.snapshot_sha256,
        )


def snapshot_digest(record_checksums: dict[UUID, str], receipts: dict[UUID, ReceiptEvidence]) -> str:
    return canonical_digest({
        "records": sorted([str(k), v] for k, v in record_checksums.items()),
        "receipts": sorted([str(k), v.checksum] for k, v in receipts.items()),
    })


def check_max_records(max_records: Any) -> int:
    if isinstance(max_records, bool) or not isinstance(max_records, int) or not 1 <= max_records <= MAX_RECORDS_BOUND:
        raise InvalidInput("max_records", f"must be an integer in 1..{MAX_RECORDS_BOUND}, got {max_records!r}")
    return max_records


def cut_snapshot(store: Store, owner: str, *, max_records: int = DEFAULT_MAX_RECORDS) -> FeedbackSnapshot:
    """Cut the owner's relevance records (one bounded query) and resolve their receipts."""
    owner = check_owner(owner)
    max_records = check_max_records(max_records)
    with store.transaction(read_only=True) as tx:
        ops = tx.operations_in_admission_order(owner, OP_RELEVANCE, max_records + 1)
    if len(ops) > max_records:
        raise SnapshotTooLarge(
            f"owner has more than max_records={max_records} relevance records; raise max_records (at most "
            f"{MAX_RECORDS_BOUND}) or export a deliberate dataset — the snapshot never truncates"
        )
    records = {}
    checksums = {}
    for op in ops:
        record = parse_record(RelevanceRecord, op.verified(owner), owner, "feedback_id")
        records[record.feedback_id] = record
        checksums[record.feedback_id] = op.checksum
    return _assemble(store, owner, max_records, records, checksums)


def load_snapshot(store: Store, manifest: SnapshotManifest) -> FeedbackSnapshot:
    """Reload exactly the cut a manifest names and verify it reproduces the same checksum."""
    owner = manifest.owner
    wanted = {record_operation_id("relevance", owner, fid): fid for fid in manifest.feedback_ids}
    records, checksums = {}, {}
    with store.transaction(read_only=True) as tx:
        ops = tx.find_operations(owner, OP_RELEVANCE, [str(f) for f in manifest.feedback_ids])
    for key, op in ops.items():
        if op.id not in wanted:
            raise CorruptRecord(f"relevance operation for {key} has an unexpected id; the store needs repair")
        record = parse_record(RelevanceRecord, op, owner, "feedback_id")
        records[record.feedback_id] = record
        checksums[record.feedback_id] = op.checksum
    missing = set(manifest.feedback_ids) - set(records)
    if missing:
        raise MissingEvidence(f"{len(missing)} relevance records named by the snapshot manifest are gone "
                              f"(e.g. {sorted(map(str, missing))[0]}); re-cut the snapshot")
    snapshot = _assemble(store, owner, manifest.max_records, records, checksums)
    if snapshot.snapshot_sha256 != manifest.snapshot_sha256:
        raise CorruptRecord("the reloaded snapshot does not reproduce its manifest checksum; re-cut the snapshot")
    return snapshot


def _assemble(store: Store, owner: str, max_records: int, records: dict[UUID, RelevanceRecord],
              checksums: dict[UUID, str]) -> FeedbackSnapshot:
    receipts = resolve_receipts(store, owner, sorted({r.request_id for r in records.values()}, key=str))
    ordered = tuple(records[k] for k in sorted(records, key=str))
    return FeedbackSnapshot(owner=owner, max_records=max_records, records=ordered, record_checksums=checksums,
                            receipts=receipts, snapshot_sha256=snapshot_digest(checksums, receipts))


def resolve_receipts(store: Store, owner: str, request_ids: Sequence[UUID]) -> dict[UUID, ReceiptEvidence]:
    """Verified receipt evidence for every request id, or an error naming what is wrong."""
    keys = [str(r) for r in request_ids]
    with store.transaction(read_only=True) as tx:
        integrity = tx.operation_integrity(owner, OP_RECEIPT, keys, "projection_sha256")
        rows = tx.receipt_projection_rows(owner, keys)
    ops: dict[str, tuple[str, str]] = {}
    for target, checksum, intact, digest in integrity:
        if target in ops:
            raise AmbiguousRecord(f"two receipts claim request {target}; the store needs repair")
        if not intact:
            raise CorruptRecord(f"receipt {target} no longer matches its checksum; restore it from a backup")
        ops[target] = (checksum, digest)
    missing = [k for k in keys if k not in ops]
    if missing:
        raise MissingEvidence(f"feedback references a missing retrieval receipt ({len(missing)} requests, e.g. "
                              f"{missing[0]}); such records cannot be used for learning")
    evidence: dict[UUID, ReceiptEvidence] = {}
    for (request_id, receipt_checksum, schema_version, scope, query, policy, fusion, count, ints, floats,
         node_ids, base_ids, adjustments) in rows:
        checksum, digest = ops[request_id]
        header = {"schema_version": int(schema_version), "request_id": request_id, "owner": owner,
                  "scope_key": scope, "query": query, "ranking_policy": policy, "fusion": fusion,
                  "candidate_count": int(count)}
        packed = PackedProjection(header, bytes(ints), bytes(floats), node_ids, base_ids, adjustments)
        if receipt_checksum != checksum or packed.digest() != digest:
            raise CorruptRecord(f"the candidate projection of receipt {request_id} does not match the receipt; "
                                "restore it from a backup")
        if UUID(request_id) in evidence:
            raise AmbiguousRecord(f"two projections claim request {request_id}; the store needs repair")
        evidence[UUID(request_id)] = ReceiptEvidence(UUID(request_id), checksum, packed)
    absent = [k for k in keys if UUID(k) not in evidence]
    if absent:
        raise MissingEvidence(f"receipt {absent[0]} has no candidate projection; the store needs repair")
    return evidence


def snapshot_from_receipts(owner: str, receipts: Iterable[tuple[RetrievalReceipt, str]],
                           records: Iterable[RelevanceRecord], *, max_records: int = DEFAULT_MAX_RECORDS) -> FeedbackSnapshot:
    """A snapshot over exported models (receipt, checksum) and records, without a store."""
    owner = check_owner(owner)
    evidence: dict[UUID, ReceiptEvidence] = {}
    for receipt, checksum in receipts:
        if receipt.request_id in evidence and evidence[receipt.request_id].checksum != checksum:
            raise AmbiguousRecord(f"conflicting receipt identity for request {receipt.request_id}")
        evidence[receipt.request_id] = ReceiptEvidence(receipt.request_id, checksum, packed_projection(receipt))
    by_id: dict[UUID, RelevanceRecord] = {}
    for record in records:
        if record.feedback_id in by_id and by_id[record.feedback_id] != record:
            raise AmbiguousRecord(f"conflicting feedback identity for {record.feedback_id}")
        by_id[record.feedback_id] = record
    if len(by_id) > check_max_records(max_records):
        raise SnapshotTooLarge(f"{len(by_id)} records exceed max_records={max_records}")
    checksums = {k: r.checksum() for k, r in by_id.items()}
    ordered = tuple(by_id[k] for k in sorted(by_id, key=str))
    return FeedbackSnapshot(owner=owner, max_records=max_records, records=ordered, record_checksums=checksums,
                            receipts=evidence, snapshot_sha256=snapshot_digest(checksums, evidence))


MaxRecords = Annotated[int, Field(ge=1, le=MAX_RECORDS_BOUND)]
