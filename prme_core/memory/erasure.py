"""Forgetting: delete one memory, or every trace of an owner, leaving only a deletion record.

What a deletion removes and what stays:

* one memory: every version of it (content, metadata, session id) and every edge touching it.
  Receipts, feedback, citations and holdout queries that named it keep its id and content hash
  (never its text), and its node reference stays (``node_refs``: owner, id and a number, which
  stored pools and projections name it by), so every receipt still verifies and replays exactly
  from what it recorded;
* an owner: every row naming it — memories, versions, edges and node references, receipts and
  their projections, feedback, citations, holdout queries and looks, learning reports, profiles
  and pointers, API keys, pipeline artifacts and its memory revision (the deletion record keeps
  a floor one above it, so no corpus cached before the forget is served again). Other owners
  are untouched;
* the deletion record: who was deleted (owner, memory id), what (version numbers and content
  hashes for a memory; row counts per table for an owner), when and by which actor (an API key
  id, or what the Python caller named). It never holds content.

Rows leave the tables at commit; their bytes leave the database files when the store is vacuumed
(``Store.vacuum``: DuckDB rewrites its file, PostgreSQL runs VACUUM FULL on the tables).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import orjson

from prme_core.errors import InvalidInput, NodeNotFound
from prme_core.storage.base import Store
from prme_core.storage.erasure import DELETION_COLUMNS
from prme_core.types import FrozenModel, Owner, Sha256Hex, UtcDatetime, from_epoch_us
from prme_core.validation import check_owner

MAX_ACTOR_CHARS = 256


class ErasedVersion(FrozenModel):
    version: int
    content_sha256: Sha256Hex


class DeletionRecord(FrozenModel):
    """The record that a deletion happened (ids, hashes and counts; never content)."""

    seq: int
    owner: Owner
    kind: Literal["memory", "owner"]
    memory_id: UUID | None = None
    versions: tuple[ErasedVersion, ...] = ()
    rows: dict[str, int] = {}
    actor: str
    deleted_at: UtcDatetime
    record_sha256: Sha256Hex
    """SHA-256 of the stored record's canonical bytes."""


def _check_actor(actor: Any) -> str:
    if actor is None:
        return "python"
    if not isinstance(actor, str) or not actor.strip() or len(actor) > MAX_ACTOR_CHARS or "\x00" in actor:
        raise InvalidInput("actor", f"must be a non-blank string of at most {MAX_ACTOR_CHARS} characters")
    return actor


def _parse_id(node_id: Any) -> UUID:
    try:
        return node_id if isinstance(node_id, UUID) else UUID(str(node_id))
    except (ValueError, TypeError, AttributeError):
        raise InvalidInput("node_id", f"must be a UUID, got {node_id!r}") from None


def delete_memory(store: Store, owner: Any, node_id: Any, *, actor: str | None = None) -> DeletionRecord:
    """Delete one of the owner's memories (every version) and its edges; a missing or foreign
    id raises ``NodeNotFound`` exactly as an unknown one does, and writes nothing."""
    owner = check_owner(owner)
    key = _parse_id(node_id)
    who = _check_actor(actor)
    with store.transaction() as tx:
        tx.lock(f"memory:{owner}:{key}")
        versions = tx.erase_memory(owner, str(key))
        if not versions:
            raise NodeNotFound(f"node {key} does not exist for this owner")
        record = {
            "kind": "memory",
            "memory_id": str(key),
            "versions": [{"version": v, "content_sha256": h} for v, h in versions],
        }
        seq, checksum, deleted_us = tx.insert_deletion(owner, "memory", str(key), record, who, 0)
    return DeletionRecord(
        seq=seq,
        owner=owner,
        kind="memory",
        memory_id=key,
        versions=tuple(ErasedVersion(version=v, content_sha256=h) for v, h in versions),
        actor=who,
        deleted_at=from_epoch_us(deleted_us),
        record_sha256=checksum,
    )


def forget_owner(store: Store, owner: Any, *, actor: str | None = None) -> DeletionRecord:
    """Delete every row naming ``owner`` in one transaction and record that it happened. An owner
    with nothing stored is still recorded (forgetting is idempotent: the second finds 0 rows)."""
    owner = check_owner(owner)
    who = _check_actor(actor)
    with store.transaction() as tx:
        tx.lock(f"owner:{owner}")
        # the owner's revision moves past every corpus cached before the forget, so none is served again
        floor = tx.memory_revision(owner) + 1
        rows = tx.erase_owner(owner)
        record = {"kind": "owner", "rows": rows}
        seq, checksum, deleted_us = tx.insert_deletion(owner, "owner", None, record, who, floor)
    return DeletionRecord(
        seq=seq,
        owner=owner,
        kind="owner",
        rows=rows,
        actor=who,
        deleted_at=from_epoch_us(deleted_us),
        record_sha256=checksum,
    )


def deletion_records(store: Store, owner: Any) -> list[DeletionRecord]:
    """The owner's deletion records, oldest first."""
    owner = check_owner(owner)
    with store.transaction(read_only=True) as tx:
        rows = tx.deletion_rows(owner)
    return [_record(dict(zip(DELETION_COLUMNS, row, strict=True))) for row in rows]


def _record(row: dict[str, Any]) -> DeletionRecord:
    body = orjson.loads(row["record"])
    deleted: datetime = from_epoch_us(row["deleted_us"])
    return DeletionRecord(
        seq=int(row["seq"]),
        owner=row["owner"],
        kind=row["kind"],
        memory_id=UUID(row["target_id"]) if row["target_id"] else None,
        versions=tuple(ErasedVersion(**v) for v in body.get("versions", ())),
        rows=body.get("rows", {}),
        actor=row["actor"],
        deleted_at=deleted,
        record_sha256=row["checksum"],
    )
