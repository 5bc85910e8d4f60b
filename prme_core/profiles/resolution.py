"""Profile resolution at retrieval: one verified pointer read per request, request-local
multipliers.

The read is the head row, the change index's newest position and the named change from the log.
Once a change has been verified, the resolver remembers it with the log row it came from; the
next read of that scope set fetches the head, the index and that row in one statement, and the
remembered change is used only when the head still names it at the newest position and the row
read now equals the one verified (any other row is verified afresh, exactly as the first time).

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
        self._lock = threading.Lock()

    def _read(self, owner: str, key: str) -> RankingProfileState | None:
        """``registry.pointer_head``, in one statement when this scope set's change was verified
        before (see the module docstring)."""
        with self._lock:
            known = self._verified.get((owner, key))
        with self.store.transaction(read_only=True) as tx:
            if known is None:
                at = checked_head(owner, key, *tx.pointer_position(owner, key))
                op = None if at is None else tx.operation_at(*at)
            else:
                head, newest, row = tx.pointer_position_and_operation(owner, key, known[0].id)
                at = checked_head(owner, key, head, newest)
                if at is None:
                    op = None
                elif at[0] == known[0].id:
                    op = row if row is not None and row.seq == at[1] else None  # as operation_at
                else:
                    op = tx.operation_at(*at)
        if at is None:
            return None
        if known is not None and op is not None and op == known[0]:
            with self._lock:
                if (owner, key) in self._verified:
                    self._verified.move_to_end((owner, key))
            return known[1]
        state = verified_change(owner, key, at[0], op)
        assert op is not None  # verified_change refuses a missing change
        with self._lock:
            self._verified[(owner, key)] = (op, state)
            self._verified.move_to_end((owner, key))
            while len(self._verified) > self.capacity:
                self._verified.popitem(last=False)
        return state

    def __call__(
        self, owner: str, scopes: tuple[str, ...], scoring: ScoringWeights, features_sha256: str
    ) -> ProfileResolution:
        key = scope_key(scopes)
        try:
            try:
                state = self._read(owner, key)
            except PointerHeadStale:  # a change may have committed between the two reads
                state = self._read(owner, key)
        except PointerHeadStale as exc:
            log.warning("ranking profile not applied: %s", exc)
            return ProfileResolution("inapplicable", None, None, "pointer_head_stale")
        except CorruptRecord as exc:
            log.warning("ranking profile not applied: %s", exc)
            return ProfileResolution("inapplicable", None, None, "pointer_record_corrupt")
        app = None if state is None else state.application
        if app is None:
            return ProfileResolution("none")
        reason = inapplicable_reason(
            app.feature_identity_sha256, app.base_scoring, running_features_sha=features_sha256, running_scoring=scoring
        )
        if reason is not None:
            return ProfileResolution("inapplicable", None, app.profile_id, reason)
        return ProfileResolution("applied", app.multipliers, app.profile_id, None)
