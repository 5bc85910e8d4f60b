"""Ranking multipliers: one bounded factor per additive weight, renormalized.

The same helper serves request-time trials, learned profiles and offline fitting, so a score
computed at retrieval and a score proposed while learning are bit-identical. The arithmetic is
spelled out (products, then a left-to-right sum) so the scalar and vectorized forms agree.
"""

from __future__ import annotations

import operator
from functools import reduce
from typing import Annotated

import numpy as np
from pydantic import Field

from prme_core.retrieval.config import WEIGHT_FIELDS, ScoringWeights
from prme_core.types import FrozenModel

MIN_MULTIPLIER = 0.25
MAX_MULTIPLIER = 4.0

Factor = Annotated[float, Field(ge=MIN_MULTIPLIER, le=MAX_MULTIPLIER)]


class RankingMultipliers(FrozenModel):
    """One factor in [0.25, 4] per additive weight (``WEIGHT_FIELDS``); all ones (unity) leaves
    scoring exactly as it was."""

    semantic: Factor = 1.0
    lexical: Factor = 1.0
    graph: Factor = 1.0
    recency: Factor = 1.0
    salience: Factor = 1.0
    confidence: Factor = 1.0

    def vector(self) -> tuple[float, ...]:
        return tuple(getattr(self, f) for f in WEIGHT_FIELDS)

    def is_unity(self) -> bool:
        return all(v == 1.0 for v in self.vector())

    @classmethod
    def from_vector(cls, values: np.ndarray | tuple[float, ...]) -> RankingMultipliers:
        return cls(**{f: float(v) for f, v in zip(WEIGHT_FIELDS, values, strict=True)})


UNITY = RankingMultipliers()


def adjusted_weights(weights: ScoringWeights, multipliers: RankingMultipliers | None) -> ScoringWeights:
    """``w_i·m_i / Σ_j w_j·m_j`` over the additive weights; unity (or None) returns ``weights`` itself."""
    if multipliers is None or multipliers.is_unity():
        return weights
    if weights.fusion != "weighted":
        raise ValueError("ranking multipliers adjust the weighted formula and do not apply to fusion='rrf'")
    products = [w * m for w, m in zip(weights.vector(), multipliers.vector(), strict=True)]
    total = reduce(operator.add, products)  # left to right, as the vectorized form
    if not total > 0.0:
        raise ValueError("ranking multipliers leave no positive weight to renormalize")
    return weights.model_copy(update={f: p / total for f, p in zip(WEIGHT_FIELDS, products, strict=True)})


def adjusted_weight_matrix(weights: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """Vectorized ``adjusted_weights`` for an (n, WEIGHT_COUNT) matrix; bit-identical to the scalar form."""
    if np.all(multipliers == 1.0):
        return weights
    products = weights * multipliers[None, :]
    total = reduce(operator.add, (products[:, i] for i in range(products.shape[1])))
    return products / total[:, None]
