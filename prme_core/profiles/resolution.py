"""Profile resolution at retrieval: one verified pointer read per request (two small queries),
request-local multipliers.

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

from prme_core.errors import CorruptRecord, PointerHeadStale
from prme_core.profiles.model import RankingProfileState
from prme_core.profiles.registry import inapplicable_reason, pointer_head
from prme_core.receipts.projection import scope_key
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.requests import ProfileResolution
from prme_core.storage.base import Store

log = logging.getLogger(__name__)


class PointerResolver:
    """The pipeline's ``profile_resolver``: reads the newest pointer change of the exact scope
    set, checked against the operations log, and fails closed to base scoring when it is not."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _read(self, owner: str, key: str) -> RankingProfileState | None:
        with self.store.transaction(read_only=True) as tx:
            return pointer_head(tx, owner, key)

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
