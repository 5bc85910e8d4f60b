"""Shared machinery for append-only, idempotent, owner-scoped records keyed by a caller UUID
(relevance records, citations, holdout queries, profiles, pointer changes).

Each record is one operation whose id is derived from (kind, owner, caller UUID), so a retry of
the same caller UUID lands on the same row: ``INSERT … ON CONFLICT DO NOTHING`` keeps the first
record, and the caller learns whether its content matched. The record carries the server's
admission time and the checksum of the receipt it is bound to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import ValidationError

from prme_core.canonical import canonical_json, sha256_hex
from prme_core.errors import CorruptRecord, IdempotencyConflict
from prme_core.storage.base import Store
from prme_core.storage.records import OperationDraft, StoredOperation
from prme_core.types import FrozenModel

R = TypeVar("R", bound=FrozenModel)


def record_operation_id(kind: str, owner: str, key: UUID) -> str:
    """The operation id of a caller-keyed record: UUIDv5 over (kind, owner, caller UUID)."""
    return str(uuid5(NAMESPACE_URL, canonical_json([f"prme:{kind}:v1", owner, str(key)]).decode()))


def parse_record(model: type[R], op: StoredOperation, owner: str, key_field: str) -> R:
    """A verified operation's record; owner, key and canonical checksum must all agree."""
    try:
        record = model.model_validate_json(op.payload)
    except ValidationError as exc:
        raise CorruptRecord(
            f"stored {op.op_type} {op.target_id} no longer validates: {exc.errors()[0]['msg']}"
        ) from exc
    if record.owner != owner or str(getattr(record, key_field)) != op.target_id:
        raise CorruptRecord(f"stored {op.op_type} {op.target_id}: owner or identity mismatch")
    if sha256_hex(record.canonical_bytes()) != op.checksum:
        raise CorruptRecord(f"stored {op.op_type} {op.target_id}: canonical bytes do not reproduce its checksum")
    return record


def append_record(
    store: Store,
    *,
    kind: str,
    op_type: str,
    record: R,
    key_field: str,
    scope_key: str,
    same: Callable[[R, R], bool],
    conflict: str,
) -> R:
    """Append ``record`` idempotently; an exact retry returns the first record, a conflicting
    reuse of ``key`` raises ``IdempotencyConflict`` with ``conflict`` and writes nothing."""
    owner = record.owner
    key: UUID = getattr(record, key_field)
    draft = OperationDraft(
        id=record_operation_id(kind, owner, key),
        owner=owner,
        op_type=op_type,
        payload=record.canonical_bytes(),
        scope_key=scope_key,
        target_id=str(key),
    )
    with store.transaction() as tx:
        stored, written = tx.append_operation(draft)
    if written:
        return record
    first = parse_record(type(record), stored.verified(owner), owner, key_field)
    if not same(first, record):
        raise IdempotencyConflict(conflict)
    return first


def read_record(
    store: Store, model: type[R], *, kind: str, op_type: str, owner: str, key: UUID, key_field: str
) -> R | None:
    with store.transaction(read_only=True) as tx:
        op = tx.get_operation(owner, record_operation_id(kind, owner, key))
    if op is None or op.op_type != op_type:
        return None
    return parse_record(model, op, owner, key_field)


def list_records(
    store: Store, model: type[R], *, op_type: str, owner: str, after: UUID | None, limit: int, key_field: str
) -> list[R]:
    with store.transaction(read_only=True) as tx:
        ops = tx.list_operations(owner, op_type, after_target=None if after is None else str(after), limit=limit)
    return [parse_record(model, op, owner, key_field) for op in ops]
