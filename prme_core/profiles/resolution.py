"""Profile resolution at retrieval: one verified pointer read per request, request-local
multipliers. The statement that reads the pointer also reads the owner's memory revision, which
the pipeline hands to its corpus cache (one round trip instead of two per retrieval).

The read is the head row, the change index's newest position and the named change from the log.
Once a change has been verified, the resolver remembers it with the log row it came from; the
next read of that scope set fetches the head, the index and that row in one statement, and the
remembered change is used only when the head still names it at the newest position and the row
read now equals the one verified (any other row is verified afresh, exactly as the first time).
Where the store can tell that nothing a pointer read sees has changed since the last read of
that scope set (``Store.state_version``: a DuckDB file, whose only writer is this process), the
last read's outcome is reused without a statement; a retrieval's own receipt does not count as
a change, and any other write does.

Statuses: ``none`` (no active profile: base scoring), ``applied`` (the active profile's
multipliers for this request only), ``inapplicable`` (base scoring is used and the reason
reported: the running pipeline's feature identity or base scoring differs from the profile's
evidence, the request uses rank fusion, or the pointer failed verification — its head row
disagrees with the operations log, ``pointer_head_stale``, or its change record fails its
checksum, ``pointer_record_corrupt``). Explicit request multipliers win before resolution runs
(``request_override``). Shared configuration is never modified.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from prme_core.errors import CorruptRecord, PointerHeadStale
from prme_core.profiles.model import RankingProfileState
from prme_core.profiles.registry import checked_head, inapplicable_reason, verified_change
from prme_core.receipts.projection import scope_key
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.requests import ProfileResolution
from prme_core.storage.base import Store
from prme_core.storage.records import StoredOperation

log = logging.getLogger(__name__)

MAX_REMEMBERED_POINTERS = 1024
"""Verified pointer changes a resolver remembers (least recently used dropped first)."""


class PointerResolver:
    """The pipeline's ``profile_resolver``: reads the newest pointer change of the exact scope
    set, checked against the operations log, and fails closed to base scoring when it is not."""

    def __init__(self, store: Store, capacity: int = MAX_REMEMBERED_POINTERS) -> None:
        self.store = store
        self.capacity = capacity
        self._verified: OrderedDict[tuple[str, str], tuple[StoredOperation, RankingProfileState]] = OrderedDict()
        self._unchanged: OrderedDict[tuple[str, str], tuple[int, RankingProfileState | None, int | None]] = (
            OrderedDict()
        )  # (owner, key) → (state version before the read, its outcome)
        self._lock = threading.Lock()

    def _remember(self, table: OrderedDict, at: tuple[str, str], value: object) -> None:
        with self._lock:
            table[at] = value
            table.move_to_end(at)
            while len(table) > self.capacity:
                table.popitem(last=False)

    def _read(self, owner: str, key: str) -> tuple[RankingProfileState | None, int | None]:
        """``_read_store``, or its last outcome for this scope set while the store's state
        version is the one read before it (see the module docstring)."""
        version = self.store.state_version()
        if version is not None:
            with self._lock:
                last = self._unchanged.get((owner, key))
            if last is not None and last[0] == version:
                return last[1], last[2]
        state, revision = self._read_store(owner, key)
        if version is not None:
            self._remember(self._unchanged, (owner, key), (version, state, revision))
        return state, revision

    def _read_store(self, owner: str, key: str) -> tuple[RankingProfileState | None, int | None]:
        """``registry.pointer_head`` and the owner's memory revision, in one statement when this
        scope set's change was verified before (see the module docstring)."""
        with self._lock:
            known = self._verified.get((owner, key))
        with self.store.transaction(read_only=True) as tx:
            read = tx.pointer_read(owner, key, None if known is None else known[0].id, memory_revision=True)
            at = checked_head(owner, key, read.head, read.newest)
            if at is None:
                op = None
            elif known is not None and at[0] == known[0].id:
                op = read.operation  # as operation_at: the row at the head's position, or none
                if op is not None and op.seq != at[1]:
                    op = None
            else:
                op = tx.operation_at(*at)
        revision = read.memory_revision
        if at is None:
            return None, revision
        if known is not None and op is not None and op == known[0]:
            with self._lock:
                if (owner, key) in self._verified:
                    self._verified.move_to_end((owner, key))
            return known[1], revision
        state = verified_change(owner, key, at[0], op)
        assert op is not None  # verified_change refuses a missing change
        self._remember(self._verified, (owner, key), (op, state))
        return state, revision

    def __call__(
        self, owner: str, scopes: tuple[str, ...], scoring: ScoringWeights, features_sha256: str
    ) -> ProfileResolution:
        return self.resolve(owner, scopes, scoring, features_sha256)[0]

    def resolve(
        self, owner: str, scopes: tuple[str, ...], scoring: ScoringWeights, features_sha256: str
    ) -> tuple[ProfileResolution, int | None]:
        """The resolution, and the owner's memory revision read in the same statement as the
        pointer (None when the owner has no revision row or the pointer failed verification: the
        corpus cache then reads it)."""
        key = scope_key(scopes)
        try:
            try:
                state, revision = self._read(owner, key)
            except PointerHeadStale:  # a change may have committed between the two reads
                state, revision = self._read(owner, key)
        except PointerHeadStale as exc:
            log.warning("ranking profile not applied: %s", exc)
            return ProfileResolution("inapplicable", None, None, "pointer_head_stale"), None
        except CorruptRecord as exc:
            log.warning("ranking profile not applied: %s", exc)
            return ProfileResolution("inapplicable", None, None, "pointer_record_corrupt"), None
        app = None if state is None else state.application
        if app is None:
            return ProfileResolution("none"), revision
        reason = inapplicable_reason(
            app.feature_identity_sha256, app.base_scoring, running_features_sha=features_sha256, running_scoring=scoring
        )
        if reason is not None:
            return ProfileResolution("inapplicable", None, app.profile_id, reason), revision
        return ProfileResolution("applied", app.multipliers, app.profile_id, None), revision
