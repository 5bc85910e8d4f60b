"""Pool-replay fitting: choose a ranking adjustment by re-ranking recorded pools of training requests.

Parameters: a log-multiplier in [ln 0.25, ln 4] per additive weight field
(``multipliers.FACTOR_COUNT``) and, for profile family 2, the interaction weights in [0, 0.5]
(``multipliers.INTERACTION_WEIGHT_COUNT``); the family's identity element (unity, the base configuration's
interaction weights) reproduces the base ranking exactly. Every evaluation re-ranks each training
request's whole recorded pool through ``pool_ranking.PoolSet`` (the arithmetic of retrieval), so
what is fitted is what a fresh retrieval over the same memory would return.

Objectives (training groups only; each group weighs the same, a group's value is the mean over
its requests):

* ``pool_ndcg_search_v2`` (the default) maximizes judged-positive NDCG@k of the returned list —
  with each positive counted at its score less ``ndcg_margin``, so a move scores only when
  positives lead by a margin (NDCG alone is flat and rewards the smallest change that just
  flips the training rankings, which generalizes poorly) — minus ``pool_regularization`` ×
  (Σ (ln m)² + Σ ((β − β_base)/0.5)²);
* ``pool_pairwise_logistic_v2`` (the named alternative) minimizes the mean softplus of
  ``margin_scale`` × (s_neg − s_pos) over explicit pairs (a judged candidate the list does not
  return scores 0) plus ``regularization`` × the same penalty.

Search (deterministic: same inputs, same bits): the identity, then ``search_starts`` points drawn
from a PCG64 generator seeded with the config's seed (log-multipliers uniform in ±ln 2,
interaction weights uniform in [0, 0.5]); from the best, coordinate ascent over the
parameters in order with steps (0.5, 0.25, 0.125, 0.0625) in log space and (0.2, 0.1, 0.05,
0.025) for interaction weights, up to ``passes_per_step`` passes per step; a move is kept only
when it improves the objective by more than 1e-12. Group means are summed with ``math.fsum``,
and multipliers come from ``fit.multipliers_from_logs``, so the result does not depend on
summation order or on the CPU's ``exp``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from prme_core.learning.fit import IMPROVEMENT_EPSILON, STEP_SCHEDULE, multipliers_from_logs
from prme_core.learning.pool_ranking import PoolRanking, PoolSet
from prme_core.retrieval.config import MAX_INTERACTION_WEIGHT
from prme_core.retrieval.multipliers import (
    FACTOR_COUNT,
    FAMILY_V1,
    INTERACTION_WEIGHT_COUNT,
    MAX_MULTIPLIER,
    MIN_MULTIPLIER,
    ProfileFamily,
    RankingMultipliers,
)

POOL_NDCG_ALGORITHM = "pool_ndcg_search_v2"
POOL_PAIRWISE_ALGORITHM = "pool_pairwise_logistic_v2"
PoolAlgorithm = Literal["pool_ndcg_search_v2", "pool_pairwise_logistic_v2"]
BETA_STEPS = (0.2, 0.1, 0.05, 0.025)
START_LOG_SPAN = math.log(2.0)
_LOW, _HIGH = math.log(MIN_MULTIPLIER), math.log(MAX_MULTIPLIER)


@dataclass(frozen=True)
class Parameters:
    """A point of the search: the log-multipliers and (family 2) the interaction weights."""

    log_multipliers: tuple[float, ...]
    interactions: tuple[float, ...] | None

    def adjustment(self) -> RankingMultipliers:
        return RankingMultipliers.from_vector(multipliers_from_logs(np.array(self.log_multipliers)), self.interactions)

    def values(self) -> list[float]:
        return [*self.log_multipliers, *(self.interactions or ())]

    def with_value(self, index: int, value: float) -> Parameters:
        v = self.values()
        v[index] = value
        return Parameters(tuple(v[:FACTOR_COUNT]), None if self.interactions is None else tuple(v[FACTOR_COUNT:]))


class PoolObjective:
    """The training objective over a fixed set of pools (higher is better)."""

    def __init__(
        self,
        pools: PoolSet,
        request_group: np.ndarray,
        *,
        algorithm: PoolAlgorithm,
        k: int,
        regularization: float,
        margin_scale: float,
        base_interactions: tuple[float, ...],
        ndcg_margin: float = 0.0,
    ) -> None:
        self.pools, self.algorithm, self.k = pools, algorithm, k
        self.ndcg_margin = ndcg_margin
        self.regularization, self.margin_scale = regularization, margin_scale
        self.base_interactions = base_interactions
        self.request_group = request_group
        self.groups = int(request_group.max(initial=-1)) + 1
        self.requests_per_group = np.bincount(request_group, minlength=self.groups).astype(np.float64)
        self.pairs_per_request = np.bincount(pools.pair_request, minlength=pools.requests).astype(np.float64)
        self.evaluations = 0

    def penalty(self, p: Parameters) -> float:
        terms = [v * v for v in p.log_multipliers]
        if p.interactions is not None:
            terms += [((b - b0) / MAX_INTERACTION_WEIGHT) ** 2 for b, b0 in zip(p.interactions, self.base_interactions)]
        return math.fsum(terms)

    def group_mean(self, per_request: np.ndarray) -> float:
        per_group = np.bincount(self.request_group, per_request, minlength=self.groups) / self.requests_per_group
        return math.fsum(per_group.tolist()) / self.groups

    def value(self, p: Parameters) -> float:
        self.evaluations += 1
        if self.algorithm == POOL_NDCG_ALGORITHM:
            ranking = self.pools.rank(p.adjustment(), positive_margin=self.ndcg_margin)
            ndcg, _ = self.pools.judged_metrics(ranking, self.k)
            return self.group_mean(ndcg) - self.regularization * self.penalty(p)
        return -(self.pairwise_loss(self.pools.rank(p.adjustment())) + self.regularization * self.penalty(p))

    def pairwise_loss(self, ranking: PoolRanking) -> float:
        scores = self.pools.judged_scores(ranking)
        z = self.margin_scale * (scores[self.pools.pair_negative] - scores[self.pools.pair_positive])
        losses = np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))
        per_request = np.bincount(self.pools.pair_request, losses, minlength=self.pools.requests)
        with np.errstate(invalid="ignore"):
            per_request = np.where(self.pairs_per_request > 0, per_request / self.pairs_per_request, 0.0)
        return self.group_mean(per_request)


@dataclass(frozen=True)
class SearchResult:
    parameters: Parameters
    value_at_identity: float
    value: float
    evaluations: int


def identity(family: ProfileFamily, base_interactions: tuple[float, ...]) -> Parameters:
    return Parameters((0.0,) * FACTOR_COUNT, None if family == FAMILY_V1 else tuple(base_interactions))


def search(
    objective: PoolObjective, *, family: ProfileFamily, seed: int, starts: int, passes_per_step: int
) -> SearchResult:
    """Seeded starts, then coordinate ascent (see the module docstring)."""
    start = identity(family, objective.base_interactions)
    best, best_value = start, objective.value(start)
    at_identity = best_value
    rng = np.random.Generator(np.random.PCG64(seed))
    for _ in range(starts):
        logs = tuple(float(v) for v in rng.uniform(-START_LOG_SPAN, START_LOG_SPAN, FACTOR_COUNT))
        betas = (
            None
            if family == FAMILY_V1
            else tuple(float(v) for v in rng.uniform(0.0, MAX_INTERACTION_WEIGHT, INTERACTION_WEIGHT_COUNT))
        )
        trial = Parameters(logs, betas)
        value = objective.value(trial)
        if value > best_value + IMPROVEMENT_EPSILON:
            best, best_value = trial, value
    size = len(best.values())
    for log_step, beta_step in zip(STEP_SCHEDULE, BETA_STEPS, strict=True):
        for _ in range(passes_per_step):
            moved = False
            for index in range(size):
                step, low, high = (
                    (log_step, _LOW, _HIGH) if index < FACTOR_COUNT else (beta_step, 0.0, MAX_INTERACTION_WEIGHT)
                )
                current = best.values()[index]
                for move in (-step, step):
                    value_at = min(max(current + move, low), high)
                    if value_at == best.values()[index]:
                        continue
                    trial = best.with_value(index, value_at)
                    value = objective.value(trial)
                    if value > best_value + IMPROVEMENT_EPSILON:
                        best, best_value, moved = trial, value, True
            if not moved:
                break
    return SearchResult(best, at_identity, best_value, objective.evaluations)
