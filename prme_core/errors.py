"""Typed errors. Every message names the field, the bound and what to do next.

All errors derive from ``PrmeError``; input problems are also ``ValueError`` so callers that
only know the standard library still catch them.
"""

from __future__ import annotations


class PrmeError(Exception):
    """Base class of every error PRME raises on purpose."""


class InvalidInput(PrmeError, ValueError):
    """A caller-supplied value is malformed or out of bounds; nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class CanonicalFormError(PrmeError, ValueError):
    """A value has no canonical JSON form (NaN, naive datetime, unsupported type)."""


class NotFound(PrmeError, LookupError):
    """The id does not exist for this owner (a foreign id reads the same as a missing one)."""


class NodeNotFound(NotFound):
    """No memory node with that id exists for the owner."""


class ReceiptNotFound(NotFound):
    """No retrieval receipt with that request id exists for the owner."""


class ProfileNotFound(NotFound):
    """No ranking profile with that id exists for the owner."""


class IntegrityError(PrmeError):
    """Stored evidence failed verification (checksum, owner or identity mismatch)."""


class CorruptRecord(IntegrityError):
    """A stored row no longer matches its checksum; restore it from a backup before use."""


class AmbiguousRecord(IntegrityError):
    """More than one stored row claims the same identity; the store needs repair."""


class IdempotencyConflict(PrmeError, ValueError):
    """A caller idempotency key was reused with different content; the first record stands."""


class DuplicateKey(IdempotencyConflict):
    """A write hit an existing primary key; the surrounding transaction has been abandoned."""


class StoreUnavailable(PrmeError):
    """The store could not be opened or reached (bad URL, server down, file locked)."""


class UnsupportedOperation(PrmeError, ValueError):
    """The request is well formed but cannot be honoured under the current configuration."""


class HoldoutIntegrityError(IntegrityError, ValueError):
    """A full-retrieval holdout is not a valid paired experiment (arms differ outside the declared
    multiplier change, receipts are reused or mismatched, or holdout queries overlap training)."""


class MemoryChangedDuringHoldout(IntegrityError):
    """The owner's memory changed while holdout pairs were produced; pause writes and rerun."""

    def __init__(self, message: str, *, before: str = "", after: str = "") -> None:
        super().__init__(message)
        self.before = before
        self.after = after


class HoldoutQueryNotFound(NotFound):
    """No registered holdout query with that id exists for the owner and scope set."""


class StaleProfileError(PrmeError):
    """The active profile is not the one the change expected; re-inspect the pointer and retry."""


class ProfileInapplicable(PrmeError, ValueError):
    """The profile's recorded feature identity or base scoring differs from the running pipeline."""


class NoOpTransition(PrmeError, ValueError):
    """The requested pointer change would not change the active profile."""
