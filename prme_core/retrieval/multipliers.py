"""Ranking multipliers: the request-local ranking adjustment of profile families 1 and 2.

Family 1 (``multipliers_v1``): one bounded factor in [0.25, 4] per additive weight field
(``FACTOR_COUNT``), applied and renormalized (``w_i·m_i / Σ_j w_j·m_j``). Family 2
(``multipliers_interactions_v2``): the same factors plus explicit weights in [0, 0.5] for the
query–memory interaction features (``INTERACTION_WEIGHT_COUNT``, ``features.INTERACTION_NAMES``),
which replace the configured ones and stay outside the factors' sum. A family-2 adjustment names
every interaction weight family 2 was defined with (``FAMILY_V2_INTERACTIONS``) or none; none
means family 1. An interaction feature added later is optional in family 2: absent, it keeps the
configured weight, so stored family-2 profiles stay valid and keep their bytes (absent
interaction weights are never serialized, which also leaves family 1's stored form unchanged).
Adjustments name weights by field, so one applies to arrays of any feature layout
(``layout_factors``: a weight the family does not name keeps 1).

Identity: unity factors, and (family 2) the base configuration's own interaction weights,
return the configured weights themselves, so the base ranking is reproduced bit-for-bit.

The same helper serves request-time trials, learned profiles, pool replay and offline fitting,
so a score computed at retrieval and a score proposed while learning are bit-identical. The
arithmetic is spelled out (products, then a left-to-right sum) so the scalar and vectorized
forms agree.
"""

from __future__ import annotations

import operator
from functools import reduce
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, model_serializer, model_validator

from prme_core.features import FeatureLayout, layout_for
from prme_core.retrieval.config import INTERACTION_FIELDS, WEIGHT_FIELDS, InteractionWeight, ScoringWeights
from prme_core.types import FrozenModel

MIN_MULTIPLIER = 0.25
MAX_MULTIPLIER = 4.0
ProfileFamily = Literal["multipliers_v1", "multipliers_interactions_v2"]
FAMILY_V1: ProfileFamily = "multipliers_v1"
FAMILY_V2: ProfileFamily = "multipliers_interactions_v2"
FACTOR_COUNT = len(WEIGHT_FIELDS)  # factors of both families: one per additive weight field
INTERACTION_WEIGHT_COUNT = len(INTERACTION_FIELDS)  # the interaction weights a new family-2 fit sets
FAMILY_V2_INTERACTIONS: tuple[str, ...] = layout_for(10).interactions
"""The interaction weights every family-2 adjustment names: those of receipt version 10's layout,
which introduced the family (a later interaction feature is optional, see the module docstring)."""

Factor = Annotated[float, Field(ge=MIN_MULTIPLIER, le=MAX_MULTIPLIER)]


class RankingMultipliers(FrozenModel):
    """A factor in [0.25, 4] per ``WEIGHT_FIELDS`` and, for family 2, the interaction weights in
    [0, 0.5] (``INTERACTION_FIELDS``); all factors 1 and no interaction weights (unity) leave
    scoring exactly as it was."""

    semantic: Factor = 1.0
    lexical: Factor = 1.0
    graph: Factor = 1.0
    recency: Factor = 1.0
    salience: Factor = 1.0
    confidence: Factor = 1.0
    term_coverage: InteractionWeight | None = None
    bigram_overlap: InteractionWeight | None = None
    entity_match: InteractionWeight | None = None

    @model_validator(mode="after")
    def _all_or_no_interactions(self) -> RankingMultipliers:
        given = [getattr(self, f) is not None for f in FAMILY_V2_INTERACTIONS]
        if any(given) and not all(given):
            missing = [f for f, g in zip(FAMILY_V2_INTERACTIONS, given) if not g]
            raise ValueError(
                f"a family-2 adjustment sets every interaction weight {FAMILY_V2_INTERACTIONS}; {missing[0]} is missing"
            )
        later = [f for f in INTERACTION_FIELDS if f not in FAMILY_V2_INTERACTIONS and getattr(self, f) is not None]
        if later and not any(given):
            raise ValueError(f"interaction weight {later[0]} belongs to family 2, which sets {FAMILY_V2_INTERACTIONS}")
        return self

    @model_serializer(mode="wrap")
    def _without_absent_interactions(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in INTERACTION_FIELDS:
                if data.get(name, 0.0) is None:
                    del data[name]
        return data

    @property
    def family(self) -> ProfileFamily:
        return FAMILY_V1 if self.term_coverage is None else FAMILY_V2

    def vector(self) -> tuple[float, ...]:
        return tuple(getattr(self, f) for f in WEIGHT_FIELDS)

    def interaction_vector(self) -> tuple[float | None, ...] | None:
        """The family-2 interaction weights in ``INTERACTION_FIELDS`` order (None for one the
        adjustment leaves at its configured weight), or None for family 1."""
        return None if self.term_coverage is None else tuple(getattr(self, f) for f in INTERACTION_FIELDS)

    def interaction_update(self) -> dict[str, float]:
        """The interaction weights this adjustment replaces, by field (empty for family 1)."""
        return {f: v for f in INTERACTION_FIELDS if (v := getattr(self, f)) is not None}

    def is_unity(self) -> bool:
        return all(v == 1.0 for v in self.vector()) and self.term_coverage is None

    def is_identity_for(self, weights: ScoringWeights) -> bool:
        """Whether applying this adjustment to ``weights`` returns them unchanged."""
        return all(v == 1.0 for v in self.vector()) and all(
            getattr(weights, f) == v for f, v in self.interaction_update().items()
        )

    @classmethod
    def from_vector(
        cls, values: np.ndarray | tuple[float, ...], interactions: np.ndarray | tuple[float, ...] | None = None
    ) -> RankingMultipliers:
        fields = {f: float(v) for f, v in zip(WEIGHT_FIELDS, values, strict=True)}
        if interactions is not None:
            fields.update({f: float(v) for f, v in zip(INTERACTION_FIELDS, interactions, strict=True)})
        return cls(**fields)

    @classmethod
    def identity(cls, family: ProfileFamily, weights: ScoringWeights) -> RankingMultipliers:
        """The family's identity element over ``weights`` (the base configuration)."""
        return cls() if family == FAMILY_V1 else cls.from_vector((1.0,) * FACTOR_COUNT, weights.interaction_vector())


UNITY = RankingMultipliers()


def adjusted_weights(weights: ScoringWeights, multipliers: RankingMultipliers | None) -> ScoringWeights:
    """``w_i·m_i / Σ_j w_j·m_j`` over the additive weight fields and, for family 2, the interaction
    weights replaced; an identity adjustment (or None) returns ``weights`` itself."""
    if multipliers is None or multipliers.is_identity_for(weights):
        return weights
    if weights.fusion != "weighted":
        raise ValueError("ranking multipliers adjust the weighted formula and do not apply to fusion='rrf'")
    update: dict[str, float] = {}
    if not all(v == 1.0 for v in multipliers.vector()):
        products = [w * m for w, m in zip(weights.vector(), multipliers.vector(), strict=True)]
        total = reduce(operator.add, products)  # left to right, as the vectorized form
        if not total > 0.0:
            raise ValueError("ranking multipliers leave no positive weight to renormalize")
        update.update({f: p / total for f, p in zip(WEIGHT_FIELDS, products, strict=True)})
    update.update(multipliers.interaction_update())
    return weights.model_copy(update=update)


def adjusted_weight_matrix(weights: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """Vectorized ``adjusted_weights`` of the factors for an (n, factors) matrix of weights
    (``layout_factors`` lines the factors up with a layout's weights); bit-identical to the
    scalar form."""
    if np.all(multipliers == 1.0):
        return weights
    products = weights * multipliers[None, :]
    total = reduce(operator.add, (products[:, i] for i in range(products.shape[1])))
    return products / total[:, None]


def layout_factors(factors: np.ndarray | tuple[float, ...], layout: FeatureLayout) -> np.ndarray:
    """Factors given in ``WEIGHT_FIELDS`` order, one per ``layout.weights`` by name: a layout
    weight the family does not name keeps factor 1; a factor the layout lacks must be 1 (its
    weight is not in these arrays), otherwise ``ValueError``."""
    values = dict(zip(WEIGHT_FIELDS, (float(v) for v in factors), strict=True))
    if layout.weights == WEIGHT_FIELDS:
        return np.asarray(factors, dtype=np.float64)
    lost = [name for name, v in values.items() if v != 1.0 and name not in layout.weights]
    if lost:
        raise ValueError(f"the adjustment scales {lost[0]!r}, which feature layout {layout.weights} does not have")
    return np.array([values.get(name, 1.0) for name in layout.weights], dtype=np.float64)
