"""Profile resolution at retrieval: one pointer read per request, request-local multipliers.

Statuses: ``none`` (no active profile: base scoring), ``applied`` (the active profile's
multipliers for this request only), ``inapplicable`` (the running pipeline's feature identity or
base scoring differs from the profile's evidence, or the request uses rank fusion: base scoring
is used and the reason reported). Explicit request multipliers win before resolution runs
(``request_override``). Shared configuration is never modified.
"""

from __future__ import annotations

from prme_core.profiles.registry import inapplicable_reason, pointer_head
from prme_core.receipts.projection import scope_key
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.pipeline import ProfileResolution
from prme_core.storage.base import Store


class PointerResolver:
    """The pipeline's ``profile_resolver``: reads the newest pointer change of the exact scope set."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, owner: str, scopes: tuple[str, ...], scoring: ScoringWeights,
                 features_sha256: str) -> ProfileResolution:
        with self.store.transaction(read_only=True) as tx:
            state = pointer_head(tx, owner, scope_key(scopes))
        app = None if state is None else state.application
        if app is None:
            return ProfileResolution("none")
        reason = inapplicable_reason(app.feature_identity_sha256, app.base_scoring,
                                     running_features_sha=features_sha256, running_scoring=scoring)
        if reason is not None:
            return ProfileResolution("inapplicable", None, app.profile_id, reason)
        return ProfileResolution("applied", app.multipliers, app.profile_id, None)
