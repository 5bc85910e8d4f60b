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

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, get_args
from uuid import UUID

import numpy as np

from prme_core.canonical import canonical_digest, is_sha256_hex, parse_json
from prme_core.errors import AmbiguousRecord, CorruptRecord, InvalidInput, MissingEvidence, SnapshotTooLarge
from prme_core.feedback.relevance import OP_RELEVANCE, RelevanceMethod, RelevanceRecord
from prme_core.gcpause import cyclic_gc_paused
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.pool import PoolColumns
from prme_core.receipts.projection import (
    INT_COLUMNS,
    POOL_COMPLETE,
    POOL_REPLAYABLE,
    PackedProjection,
    packed_projection,
)
from prme_core.receipts.projection import scope_key as make_scope_key
from prme_core.receipts.store import OP_RECEIPT, get_receipts, load_pool_columns
from prme_core.receipts.versions import PACKED_POOL_SINCE, POOL_SINCE
from prme_core.storage.base import Store
from prme_core.storage.keyed_records import record_operation_id
from prme_core.storage.records import StoredOperation
from prme_core.types import FrozenModel, Owner, Sha256Hex
from prme_core.validation import check_owner, check_scope_set

DEFAULT_MAX_RECORDS = 10_000
MAX_RECORDS_BOUND = 100_000


RECORD_FIELDS = frozenset(RelevanceRecord.model_fields)


@dataclass(frozen=True, slots=True)
class RecordView:
    """A relevance record as learning reads it: ids as canonical strings, labels keyed by
    node-id string. Built from a verified payload without a full model round trip."""

    feedback_id: str
    request_id: str
    labels: dict[str, bool]
    surface: str
    method: str
    owner: str
    receipt_checksum: str
    scope_key: str

    @classmethod
    def of(cls, record: RelevanceRecord) -> RecordView:
        return cls(
            str(record.feedback_id),
            str(record.request_id),
            {str(k): v for k, v in record.labels.items()},
            record.surface,
            record.method,
            record.owner,
            record.receipt_checksum,
            record.scope_key,
        )


def _is_uuid_text(value: object) -> bool:
    return isinstance(value, str) and len(value) == 36 and value.count("-") == 4 and value == value.lower()


def parse_record_payload(op: StoredOperation, owner: str) -> RecordView:
    """A relevance record from an operation whose checksum was verified: structure, types and
    identity are checked field by field (the payload was a validated model when admitted)."""
    data = parse_json(op.payload)
    bad = None
    if not isinstance(data, dict) or set(data) != RECORD_FIELDS:
        bad = "its fields"
    elif data["schema_version"] != 1 or data["owner"] != owner or data["feedback_id"] != op.target_id:
        bad = "its version, owner or identity"
    elif not (_is_uuid_text(data["feedback_id"]) and _is_uuid_text(data["request_id"])):
        bad = "its ids"
    elif data["surface"] not in ("results", "context") or data["method"] not in RELEVANCE_METHODS:
        bad = "its surface or method"
    elif not (
        isinstance(data["labels"], dict)
        and data["labels"]
        and all(map(isinstance, data["labels"].values(), repeat(bool)))
    ):
        bad = "its labels"
    elif not is_sha256_hex(data["receipt_checksum"]):
        bad = "its receipt checksum"
    if bad:
        raise CorruptRecord(f"stored relevance record {op.target_id} is malformed ({bad}); restore it from a backup")
    return RecordView(
        data["feedback_id"],
        data["request_id"],
        data["labels"],
        data["surface"],
        data["method"],
        data["owner"],
        data["receipt_checksum"],
        data["scope_key"],
    )


RELEVANCE_METHODS = frozenset(get_args(RelevanceMethod))

_ID_SEPARATOR = "\x1f"
_ID_WIDTH = 36  # a canonical UUID string
_ID_STRIDE = _ID_WIDTH + 1


@dataclass(frozen=True)
class ReceiptEvidence:
    """A verified receipt as learning needs it: checksum plus its packed candidate projection."""

    request_id: str
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

    def node_ids(self) -> list[str]:
        """Candidate node ids (strings) in rank order (split once)."""
        ids = self._arrays.get("_node_ids")
        if ids is None:
            ids = self._arrays["_node_ids"] = self.projection.node_ids.split("\x1f") if self.projection.node_ids else []
        return ids

    def _fixed_width(self) -> bool:
        """Whether every candidate id is 36 characters long (UUID strings, the normal case), so
        ranks follow from offsets in the joined text without splitting it into strings: the
        length fits and the separators sit exactly at every 37th character (checked once)."""
        fixed = self._arrays.get("_fixed")
        if fixed is None:
            n, text = int(self.header["candidate_count"]), self.projection.node_ids
            fixed = self._arrays["_fixed"] = (
                n > 0
                and len(text) == _ID_STRIDE * n - 1
                and text.count(_ID_SEPARATOR) == n - 1
                and text[_ID_WIDTH::_ID_STRIDE] == _ID_SEPARATOR * (n - 1)
            )
        return fixed

    def ranks_of(self, node_ids: Iterable[str]) -> list[int | None]:
        """The first rank at which each id is a candidate (None where it is not one)."""
        if not self._fixed_width():
            ids = self.node_ids()
            return [ids.index(node) if node in ids else None for node in node_ids]
        text, out = self.projection.node_ids, []
        for node in node_ids:
            # A 36-character needle without a separator can only match one whole 36-character id.
            at = text.find(node) if len(node) == _ID_WIDTH and _ID_SEPARATOR not in node else -1
            out.append(None if at < 0 else at // _ID_STRIDE)
        return out

    def node_ids_at(self, ranks: Iterable[int]) -> list[str]:
        """The candidate ids at the given ranks."""
        if not self._fixed_width():
            ids = self.node_ids()
            return [ids[r] for r in ranks]
        text = self.projection.node_ids
        return [text[r * _ID_STRIDE : r * _ID_STRIDE + _ID_WIDTH] for r in ranks]

    def adjustments(self) -> list[str] | None:
        """Each candidate's recorded operations as JSON, or None when no candidate has any."""
        text = self.projection.adjustments
        n = int(self.header["candidate_count"])
        if len(text) == 3 * n - 1:  # every entry is "[]"
            return None
        return text.split("\x1f")

    def flags(self) -> tuple[np.ndarray, np.ndarray]:
        """(in_context, has_content) per candidate."""
        ints = self.projection.int_block()
        return ints[INT_COLUMNS.index("in_context")], ints[INT_COLUMNS.index("has_content")]


class SnapshotManifest(FrozenModel):
    """Everything needed to reload and verify one cut (what Dagster steps pass along)."""

    owner: Owner
    max_records: int
    feedback_ids: tuple[UUID, ...]
    receipt_checksums: dict[str, Sha256Hex]
    snapshot_sha256: Sha256Hex


PoolLoader = Callable[[Sequence[str]], dict[str, PoolColumns]]
"""Request ids → the verified pool columns of those receipts (each must have a pool)."""


@dataclass(frozen=True)
class FeedbackSnapshot:
    owner: str
    max_records: int
    records: tuple[RecordView, ...]  # sorted by feedback id
    record_checksums: dict[str, str]
    receipts: dict[str, ReceiptEvidence]
    snapshot_sha256: str
    pool_loader: PoolLoader | None = field(default=None, compare=False, repr=False)
    """Reads recorded pools on demand (pool-replay fitting needs only some of them); the pools
    are bound to receipts the snapshot already verified, and a loader checks that binding."""

    @classmethod
    def of(
        cls,
        owner: str,
        max_records: int,
        records: Mapping[str, RecordView],
        record_checksums: dict[str, str],
        receipts: dict[str, ReceiptEvidence],
        pool_loader: PoolLoader | None,
    ) -> FeedbackSnapshot:
        """The snapshot of ``records`` (by feedback id) and the receipts they judge: records in
        feedback-id order, its digest over both checksum sets."""
        return cls(
            owner=owner,
            max_records=max_records,
            records=tuple(records[k] for k in sorted(records)),
            record_checksums=record_checksums,
            receipts=receipts,
            snapshot_sha256=snapshot_digest(record_checksums, receipts),
            pool_loader=pool_loader,
        )

    def may_replay_pool(self, request_id: str) -> bool:
        """Whether the request's receipt may hold a complete, replayable pool: a version-11 receipt
        whose verified projection says so, or a version-10 receipt (its inline pool says; reading
        it tells)."""
        header = self.receipts[request_id].header
        version = int(header["schema_version"])
        if version >= PACKED_POOL_SINCE:
            return header["pool_flags"] == POOL_COMPLETE | POOL_REPLAYABLE
        return version >= POOL_SINCE

    def pools(self, request_ids: Sequence[str]) -> dict[str, PoolColumns]:
        if self.pool_loader is None:
            raise MissingEvidence("this snapshot was made without access to recorded pools; re-cut it from the store")
        return self.pool_loader(request_ids)

    def manifest(self) -> SnapshotManifest:
        return SnapshotManifest(
            owner=self.owner,
            max_records=self.max_records,
            feedback_ids=tuple(UUID(r.feedback_id) for r in self.records),
            receipt_checksums={k: v.checksum for k, v in sorted(self.receipts.items())},
            snapshot_sha256=self.snapshot_sha256,
        )


def snapshot_digest(record_checksums: dict[str, str], receipts: dict[str, ReceiptEvidence]) -> str:
    return canonical_digest(
        {
            "records": sorted([k, v] for k, v in record_checksums.items()),
            "receipts": sorted([k, v.checksum] for k, v in receipts.items()),
        }
    )


def check_max_records(max_records: Any) -> int:
    if isinstance(max_records, bool) or not isinstance(max_records, int) or not 1 <= max_records <= MAX_RECORDS_BOUND:
        raise InvalidInput("max_records", f"must be an integer in 1..{MAX_RECORDS_BOUND}, got {max_records!r}")
    return max_records


@cyclic_gc_paused()
def cut_snapshot(
    store: Store, owner: str, *, max_records: int = DEFAULT_MAX_RECORDS, scopes: Sequence[str] | None = None
) -> FeedbackSnapshot:
    """Cut the owner's relevance records (one bounded query) and resolve their receipts. With
    ``scopes``, only the records of retrievals over exactly that scope set: a caller limited to
    those scopes learns nothing of the owner's other feedback, not even how much there is."""
    owner = check_owner(owner)
    max_records = check_max_records(max_records)
    key = None if scopes is None else make_scope_key(check_scope_set(scopes))
    with store.transaction(read_only=True) as tx:
        ops = tx.operations_in_admission_order(owner, OP_RELEVANCE, max_records + 1, scope_key=key)
    if len(ops) > max_records:
        raise SnapshotTooLarge(
            f"owner has more than max_records={max_records} relevance records; raise max_records (at most "
            f"{MAX_RECORDS_BOUND}) or export a deliberate dataset — the snapshot never truncates"
        )
    records: dict[str, RecordView] = {}
    checksums: dict[str, str] = {}
    for op in ops:
        record = parse_record_payload(op.verified(owner), owner)
        records[record.feedback_id] = record
        checksums[record.feedback_id] = op.checksum
    return _assemble(store, owner, max_records, records, checksums)


@cyclic_gc_paused()
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
        record = parse_record_payload(op, owner)
        records[record.feedback_id] = record
        checksums[record.feedback_id] = op.checksum
    missing = {str(f) for f in manifest.feedback_ids} - set(records)
    if missing:
        raise MissingEvidence(
            f"{len(missing)} relevance records named by the snapshot manifest are gone "
            f"(e.g. {sorted(map(str, missing))[0]}); re-cut the snapshot"
        )
    snapshot = _assemble(store, owner, manifest.max_records, records, checksums)
    if snapshot.snapshot_sha256 != manifest.snapshot_sha256:
        raise CorruptRecord("the reloaded snapshot does not reproduce its manifest checksum; re-cut the snapshot")
    return snapshot


def _assemble(
    store: Store, owner: str, max_records: int, records: dict[str, RecordView], checksums: dict[str, str]
) -> FeedbackSnapshot:
    receipts = resolve_receipts(store, owner, sorted({r.request_id for r in records.values()}))
    return FeedbackSnapshot.of(owner, max_records, records, checksums, receipts, _store_pools(store, owner, receipts))


def _store_pools(store: Store, owner: str, receipts: Mapping[str, ReceiptEvidence]) -> PoolLoader:
    """Packed pools (version 11) are read from their rows against the digest the verified
    projection names; inline pools (version 10) from their receipts, whose checksum must be
    the one the snapshot verified."""

    def load(request_ids: Sequence[str]) -> dict[str, PoolColumns]:
        packed: dict[str, tuple[str, str]] = {}
        inline: list[str] = []
        for request_id in request_ids:
            evidence = receipts[request_id]
            version = int(evidence.header["schema_version"])
            if version >= PACKED_POOL_SINCE:
                packed[request_id] = (evidence.checksum, evidence.header["pool_sha256"])
            elif version >= POOL_SINCE:
                inline.append(request_id)
            else:
                raise InvalidInput("request_ids", f"receipt {request_id} is version {version} and records no pool")
        out = load_pool_columns(store, owner, packed)
        for request_id, (receipt, checksum) in get_receipts(store, owner, [UUID(r) for r in inline]).items():
            if checksum != receipts[str(request_id)].checksum:
                raise CorruptRecord(f"receipt {request_id} changed since the snapshot verified it; re-cut the snapshot")
            out[str(request_id)] = receipt.pool_columns()  # type: ignore[assignment]
        missing = [r for r in inline if r not in out]
        if missing:
            raise MissingEvidence(f"receipt {missing[0]} is gone since the snapshot verified it; re-cut the snapshot")
        return out

    return load


def resolve_receipts(store: Store, owner: str, request_ids: Sequence[str]) -> dict[str, ReceiptEvidence]:
    """Verified receipt evidence for every request id, or an error naming what is wrong."""
    keys = list(request_ids)
    evidence: dict[str, ReceiptEvidence] = {}
    with store.transaction(read_only=True) as tx:
        ops: dict[str, tuple[str, str]] = {}
        for target, checksum, intact, digest in tx.operation_integrity(owner, OP_RECEIPT, keys, "projection_sha256"):
            if target in ops:
                raise AmbiguousRecord(f"two receipts claim request {target}; the store needs repair")
            if not intact:
                raise CorruptRecord(f"receipt {target} no longer matches its checksum; restore it from a backup")
            ops[target] = (checksum, digest)
        missing = [k for k in keys if k not in ops]
        if missing:
            raise MissingEvidence(
                f"feedback references a missing retrieval receipt ({len(missing)} requests, e.g. "
                f"{missing[0]}); such records cannot be used for learning"
            )
        for (
            request_id,
            receipt_checksum,
            schema_version,
            scope,
            query,
            policy,
            fusion,
            count,
            ints,
            floats,
            node_ids,
            base_ids,
            adjustments,
            pool_sha256,
            pool_flags,
        ) in tx.receipt_projection_rows(owner, keys):
            header = {
                "schema_version": int(schema_version),
                "request_id": request_id,
                "owner": owner,
                "scope_key": scope,
                "query": query,
                "ranking_policy": policy,
                "fusion": fusion,
                "candidate_count": int(count),
            }
            if int(schema_version) >= PACKED_POOL_SINCE:
                header["pool_sha256"] = pool_sha256
                header["pool_flags"] = int(pool_flags)
            if request_id in evidence:
                raise AmbiguousRecord(f"two projections claim request {request_id}; the store needs repair")
            if receipt_checksum != ops[request_id][0]:
                raise CorruptRecord(f"the candidate projection of receipt {request_id} is bound to another receipt")
            packed = PackedProjection(header, bytes(ints), bytes(floats), node_ids, base_ids, adjustments)
            evidence[request_id] = ReceiptEvidence(request_id, receipt_checksum, packed)
    # Digests hash ~10 KB each; hashlib releases the GIL, so two threads halve the wait.
    items = list(evidence.values())
    half = len(items) // 2

    def digest_all(part: list[ReceiptEvidence]) -> list[str]:
        return [e.projection.digest() for e in part]

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(digest_all, (items[:half], items[half:]))
    for item, digest in zip(items, first + second):
        if digest != ops[item.request_id][1]:
            raise CorruptRecord(
                f"the candidate projection of receipt {item.request_id} does not match the receipt; "
                "restore it from a backup"
            )
    absent = [k for k in keys if k not in evidence]
    if absent:
        raise MissingEvidence(f"receipt {absent[0]} has no candidate projection; the store needs repair")
    return evidence


def snapshot_from_receipts(
    owner: str,
    receipts: Iterable[tuple[RetrievalReceipt, str]],
    records: Iterable[RelevanceRecord],
    *,
    max_records: int = DEFAULT_MAX_RECORDS,
) -> FeedbackSnapshot:
    """A snapshot over exported models (receipt, checksum) and records, without a store."""
    owner = check_owner(owner)
    evidence: dict[str, ReceiptEvidence] = {}
    models: dict[str, RetrievalReceipt] = {}
    for receipt, checksum in receipts:
        key = str(receipt.request_id)
        if key in evidence and evidence[key].checksum != checksum:
            raise AmbiguousRecord(f"conflicting receipt identity for request {key}")
        evidence[key] = ReceiptEvidence(key, checksum, packed_projection(receipt))
        models[key] = receipt

    def pools(request_ids: Sequence[str]) -> dict[str, PoolColumns]:
        out = {}
        for request_id in request_ids:
            columns = models[request_id].pool_columns()
            if columns is None:
                raise MissingEvidence(
                    f"receipt {request_id} was exported without its packed pool; read it with its pool "
                    "(get_receipt(..., with_pool=True))"
                )
            out[request_id] = columns
        return out

    by_id: dict[str, RelevanceRecord] = {}
    for record in records:
        key = str(record.feedback_id)
        if key in by_id and by_id[key] != record:
            raise AmbiguousRecord(f"conflicting feedback identity for {key}")
        by_id[key] = record
    if len(by_id) > check_max_records(max_records):
        raise SnapshotTooLarge(f"{len(by_id)} records exceed max_records={max_records}")
    checksums = {k: r.checksum() for k, r in by_id.items()}
    views = {k: RecordView.of(r) for k, r in by_id.items()}
    return FeedbackSnapshot.of(owner, max_records, views, checksums, evidence, pools)
