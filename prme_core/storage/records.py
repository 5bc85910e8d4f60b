"""Row-level records the store hands back: operations and applied migrations."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from prme_core.canonical import canonical_json, parse_json, sha256_hex
from prme_core.errors import CorruptRecord


@dataclass(frozen=True)
class OperationDraft:
    """An operation about to be appended. ``payload`` is canonical JSON bytes; ``compressed``
    stores them compressed (``payload_z``) instead of as text (the checksum is the same)."""

    id: str
    owner: str
    op_type: str
    payload: bytes
    scope_key: str | None = None
    target_id: str | None = None
    compressed: bool = False

    @classmethod
    def of(
        cls,
        *,
        id: str,
        owner: str,
        op_type: str,
        body: object,
        scope_key: str | None = None,
        target_id: str | None = None,
    ) -> OperationDraft:
        return cls(
            id=id, owner=owner, op_type=op_type, payload=canonical_json(body), scope_key=scope_key, target_id=target_id
        )

    @cached_property
    def checksum(self) -> str:
        """SHA-256 of the payload, computed once (a receipt's draft is asked four times)."""
        return sha256_hex(self.payload)


@dataclass(frozen=True)
class StoredOperation:
    """One row of the append-only operations log, as read back."""

    seq: int
    id: str
    owner: str
    op_type: str
    scope_key: str | None
    target_id: str | None
    payload: str
    checksum: str
    admitted_at: datetime

    def verified(self, owner: str) -> StoredOperation:
        """Return self after checking owner and checksum; raise ``CorruptRecord`` otherwise."""
        if self.owner != owner:
            raise CorruptRecord(f"operation {self.id} is not owned by the reader; refusing to use it")
        if sha256_hex(self.payload) != self.checksum:
            raise CorruptRecord(
                f"operation {self.id} ({self.op_type}) does not match its checksum; "
                "the row was altered after admission: restore it from a backup"
            )
        return self

    def body(self) -> object:
        return parse_json(self.payload)


@dataclass(frozen=True)
class AppliedMigration:
    version: int
    name: str
    checksum: str
    applied_at: datetime


@dataclass(frozen=True)
class Vacuumed:
    """What a vacuum did to the store's files: their size before and after, in bytes (a rewrite
    of a small store can grow it: a fresh file allocates whole blocks)."""

    bytes_before: int
    bytes_after: int

    @property
    def reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after
