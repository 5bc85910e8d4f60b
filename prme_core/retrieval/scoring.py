"""Candidate features and the query-specific parts of scoring (all vectorized over a pool).

* recency: ``min(1, exp(−λ·days) × multiplier)``; for current-state queries days are counted
  back from the newest memory time in the pool, λ is at least 0.05 and update wording doubles;
* query-specific recency redistribution: current-state queries raise the recency weight to
  0.25, recent-episodic queries to 0.20, borrowing proportionally from the semantic and lexical
  weights and never more than those two hold;
* the current-update multiplier, an explicit post-score operation on the newest updating
  candidates of a current-state query;
* rank-fusion channel ranks and pool-relative factors for formula 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prme_core.retrieval.config import ScoringWeights

DAY_US = 86_400_000_000
CURRENT_RECENCY_TARGET = 0.25
EPISODIC_RECENCY_TARGET = 0.20
CURRENT_MIN_LAMBDA = 0.05
UPDATE_RECENCY_MULTIPLIER = 2.0


@dataclass(frozen=True)
class Redistribution:
    """What query-specific redistribution did (recorded in execution parameters)."""

    kind: str | None  # "current_state", "episodic" or None
    recency_increase: float

    def as_parameters(self) -> dict[str, object]:
        return {"kind": self.kind, "recency_increase": self.recency_increase}


def redistribute(weights: ScoringWeights, *, current: bool, episodic: bool) -> tuple[ScoringWeights, Redistribution]:
    """Raise the recency weight for current-state or episodic queries (weighted formula only).

    The increase is taken from semantic and lexical in proportion to their weights and is capped
    at their sum, so redistribution can never borrow more than those channels own.
    """
    if weights.fusion != "weighted" or not (current or episodic):
        return weights, Redistribution(None, 0.0)
    target = CURRENT_RECENCY_TARGET if current else EPISODIC_RECENCY_TARGET
    available = weights.semantic + weights.lexical
    increase = min(max(target - weights.recency, 0.0), available)
    update: dict[str, float] = {}
    if current:
        update["recency_lambda"] = max(weights.recency_lambda, CURRENT_MIN_LAMBDA)
    if increase > 0.0:
        sem_share = weights.semantic / available
        semantic = max(weights.semantic - increase * sem_share, 0.0)
        lexical = max(weights.lexical - (increase - (weights.semantic - semantic)), 0.0)
        update.update(semantic=semantic, lexical=lexical, recency=weights.recency + increase)
    if not update:
        return weights, Redistribution(None, 0.0)
    return weights.model_copy(update=update), Redistribution("current_state" if current else "episodic", increase)


def recency_factors(
    *,
    stamp_us: np.ndarray,
    memory_us: np.ndarray,
    updating: np.ndarray,
    reference_us: int,
    recency_lambda: float,
    current: bool,
) -> np.ndarray:
    """Recency per candidate (see module docstring); days are never negative."""
    if current:
        newest = np.max(memory_us) if memory_us.size else float(reference_us)
        days = np.maximum((newest - memory_us) / DAY_US, 0.0)
        lam = max(recency_lambda, CURRENT_MIN_LAMBDA)
        multiplier = np.where(updating, UPDATE_RECENCY_MULTIPLIER, 1.0)
        return np.minimum(1.0, np.exp(-lam * days) * multiplier)
    days = np.maximum((float(reference_us) - stamp_us) / DAY_US, 0.0)
    return np.minimum(1.0, np.exp(-recency_lambda * days))


def current_update_coefficients(
    base: np.ndarray, relevance: np.ndarray, eligible: np.ndarray, weights: ScoringWeights
) -> np.ndarray:
    """The current-update coefficient per candidate, 1.0 where it does not apply.

    Eligible candidates get ``base × multiplier``; under the weighted formula a candidate below
    the relevance floor is capped at its relevance, and under rank fusion it gets no boost. The
    recorded coefficient is adjusted/base, kept only when it raises the score.
    """
    return current_update_coefficient_array(
        base,
        relevance,
        eligible,
        weights.current_update_multiplier,
        weights.relevance_floor,
        weighted=weights.fusion == "weighted",
    )


def current_update_coefficient_array(
    base: np.ndarray,
    relevance: np.ndarray,
    eligible: np.ndarray,
    multiplier: float | np.ndarray,
    floor: float | np.ndarray,
    *,
    weighted: bool,
) -> np.ndarray:
    """``current_update_coefficients`` with the multiplier and floor given per candidate (or as
    scalars), so pools re-ranked in a batch under several weight sets get the same bits."""
    m = np.broadcast_to(np.asarray(multiplier, dtype=np.float64), base.shape)
    floor = np.broadcast_to(np.asarray(floor, dtype=np.float64), base.shape)
    coefficient = np.ones_like(base)
    applies = m > 1.0
    if not np.any(applies):
        return coefficient
    below = (floor > 0.0) & (relevance < floor)
    adjusted = base * m
    if weighted:
        adjusted = np.where(below, np.minimum(adjusted, relevance), adjusted)
    else:
        adjusted = np.where(below, base, adjusted)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(base > 0.0, adjusted / base, 1.0)
    keep = applies & eligible & (base > 0.0) & (adjusted > base) & (ratio >= 1.0) & (ratio <= 2.0)
    return np.where(keep, ratio, 1.0)


def competition_ranks(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Competition ranks (1, 2, 2, 4) by descending value among ``present``; 0 elsewhere."""
    ranks = np.zeros(values.shape[0], dtype=np.int64)
    idx = np.flatnonzero(present)
    if idx.size == 0:
        return ranks
    vals = values[idx]
    order = np.argsort(-vals, kind="stable")
    sorted_vals = vals[order]
    first = np.ones(sorted_vals.size, dtype=bool)
    first[1:] = sorted_vals[1:] != sorted_vals[:-1]
    rank_of_sorted = np.maximum.accumulate(np.where(first, np.arange(1, sorted_vals.size + 1), 0))
    ranks[idx[order]] = rank_of_sorted
    return ranks


def pool_relative(values: np.ndarray, on_channel: np.ndarray) -> np.ndarray:
    """``value / max(value over on-channel candidates)``, capped at 1; zeros if that max ≤ 0."""
    if not on_channel.any():
        return np.zeros_like(values)
    top = float(np.max(values[on_channel]))
    if top <= 0.0:
        return np.zeros_like(values)
    return np.minimum(values / top, 1.0)
