"""Scoring and packing configuration (frozen, validated, recorded in every receipt)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from prme_core.features import INTERACTION_NAMES, WEIGHT_NAMES
from prme_core.types import FrozenModel, Unit

WEIGHT_FIELDS: tuple[str, ...] = WEIGHT_NAMES  # one field per additive weight (prme_core.features)
INTERACTION_FIELDS: tuple[str, ...] = INTERACTION_NAMES  # one bounded weight per interaction feature
WEIGHT_SUM_TOLERANCE = 1e-6
MAX_INTERACTION_WEIGHT = 0.5
MAX_RECEIPT_POOL_DEPTH = 1000

InteractionWeight = Annotated[float, Field(ge=0.0, le=MAX_INTERACTION_WEIGHT)]

DEFAULT_NODE_TYPE_BOOSTS: dict[str, float] = {
    "fact": 1.15,
    "preference": 1.15,
    "decision": 1.15,
    "instruction": 1.15,
    "summary": 1.10,
}


class ScoringWeights(FrozenModel):
    """The additive weights (``WEIGHT_FIELDS``, summing to 1) and the rest of the scoring formula.

    ``fusion="weighted"`` is formula 1 (weighted sum, the default); ``"rrf"`` is formula 2
    (rank fusion of the semantic and lexical channels, RFC-0005 §7.2), which ignores the
    additive weights and cannot take ranking multipliers.

    ``term_coverage``, ``bigram_overlap`` and ``entity_match`` weight the query–memory
    interaction features (``retrieval.interaction``) in formula 1: each in [0, 0.5], added on
    top of the six (not part of their sum, untouched by ranking multipliers). They default to 0
    until tuning sets them; receipts before version 10 mean 0.
    """

    semantic: Unit = 0.25
    lexical: Unit = 0.20
    graph: Unit = 0.20
    recency: Unit = 0.10
    salience: Unit = 0.10
    confidence: Unit = 0.15
    recency_lambda: Annotated[float, Field(gt=0.0, le=10.0)] = 0.02
    temporal_boost: Unit = 0.15
    relevance_floor: Unit = 0.35
    current_update_multiplier: Annotated[float, Field(ge=1.0, le=2.0)] = 1.30
    node_type_boosts: dict[str, Annotated[float, Field(gt=0.0, le=4.0)]] = Field(
        default_factory=lambda: dict(DEFAULT_NODE_TYPE_BOOSTS)
    )
    fusion: Literal["weighted", "rrf"] = "weighted"
    rrf_k: Annotated[int, Field(ge=1, le=10_000)] = 60
    term_coverage: InteractionWeight = 0.0
    bigram_overlap: InteractionWeight = 0.0
    entity_match: InteractionWeight = 0.0

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> ScoringWeights:
        total = math.fsum(getattr(self, f) for f in WEIGHT_FIELDS)
        if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
            values = ", ".join(f"{f}={getattr(self, f)!r}" for f in WEIGHT_FIELDS)
            raise ValueError(f"the additive weights must sum to 1 (±1e-6); got {total!r} from {values}")
        return self

    def vector(self) -> tuple[float, ...]:
        return tuple(getattr(self, f) for f in WEIGHT_FIELDS)

    def interaction_vector(self) -> tuple[float, ...]:
        return tuple(getattr(self, f) for f in INTERACTION_FIELDS)

    def additive_vector(self) -> tuple[float, ...]:
        """Every weight formula 1 multiplies a feature by (``features.ADDITIVE_NAMES`` order)."""
        return self.vector() + self.interaction_vector()

    def boost(self, node_type: str) -> float:
        return self.node_type_boosts.get(node_type, 1.0)


Ordering = Literal["density", "score", "balanced"]
GuidanceMode = Literal["off", "temporal", "all"]
ContextFormat = Literal["auditable", "compact"]
Fidelity = Literal["full", "prose", "reference"]
FIDELITY_ORDER: tuple[str, ...] = ("full", "prose", "reference")
MAX_TOKEN_BUDGET = 131_072


class PackingConfig(FrozenModel):
    """How returned candidates become the rendered context bundle."""

    token_budget: Annotated[int, Field(ge=16, le=MAX_TOKEN_BUDGET)] = 2048
    min_fidelity: Fidelity = "prose"
    multipath_ordering: Ordering = "balanced"
    context_guidance_mode: GuidanceMode = "off"
    context_format: ContextFormat = "auditable"
    # Defaults chosen on the LoCoMo development file (NDCG@10 0.484 vs 0.475 for 20/3 and 0.443
    # with inheritance off); see the issue notes.
    session_context_top_k: Annotated[int, Field(ge=0, le=200)] = 5
    session_context_window: Annotated[int, Field(ge=1, le=20)] = 2
    session_context_score_decay: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.85
    episode_context_top_k: Annotated[int, Field(ge=0, le=50)] = 0
    episode_context_local_k: Annotated[int, Field(ge=1, le=64)] = 8
    episode_context_score_decay: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.95
    # How many scored pool members a receipt records for pool replay (0 = none). The lexical and
    # semantic channels propose up to 100 each (retrieval.candidates), so pools hold up to ~200
    # members plus graph neighbours: 250 keeps them complete, which exact pool replay needs
    # (at depth 100 no LoCoMo pool was complete; see the issue-15 note).
    receipt_pool_depth: Annotated[int, Field(ge=0, le=MAX_RECEIPT_POOL_DEPTH)] = 250
