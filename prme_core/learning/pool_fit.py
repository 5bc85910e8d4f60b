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

Shrinkage (``shrunk_search``, what a proposal and each of its cross-fitting folds are fitted by):
the search's point is pulled toward the identity by a factor λ from a grid (λ = 0 is the
identity, λ = 1 the search's point; log-multipliers and the interaction weights' distance from
the base scale by λ). λ is chosen by cross-validation inside the groups the search was given —
never on any other group: the groups are dealt into ``folds`` inner folds by a seeded
permutation, a search on the other inner folds is shrunk by every λ and judged (true judged
NDCG@k, no margin, no penalty) on the inner fold left out; the λ with the best mean over all the
groups wins, ties going to the smaller λ. The search's noise moves — parameters a few training
groups happen to reward — cost held-out groups more than they gain, so the shrunk proposal
changes fewer rankings for nothing; where the shrunk point does worse on the training objective
than the identity, the identity is kept.

A risk-averse choice (``risk_aversion`` α, the config's ``shrinkage_risk_aversion``) also measures,
on the same held-out inner folds, each λ's harm — the judged NDCG the groups that lose give up
against the identity, averaged over all the groups — and ranks the λ by held-out NDCG − α × harm:
a unit of NDCG a group loses counts 1 + α times, a unit gained once (the risk-sensitive utility
of search evaluation). A learner whose extra gain at a larger λ is bought with as much churn
takes the smaller λ; the searches, and so the NDCG evidence, are the risk-neutral choice's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from prme_core.learning.fit import IMPROVEMENT_EPSILON, STEP_SCHEDULE, multipliers_from_logs
from prme_core.learning.pool_ranking import PoolRanking, PoolRequest, PoolSet
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
INNER_FOLD_STREAM = 1
"""Second word of the PCG64 seed that deals the inner folds (the first is the config's seed)."""
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


@dataclass(frozen=True)
class ShrinkageChoice:
    """How far a search's point was pulled toward the identity, and the evidence that chose it."""

    factor: float
    inner_ndcg: tuple[float, ...]
    """Per grid factor, the mean held-out judged NDCG@k over the inner folds (empty: too few groups
    for inner folds, or a one-value grid — the grid's smallest factor is taken)."""
    kept_identity: bool
    """The shrunk point did worse than the identity on the training objective; the identity is kept."""
    inner_harm: tuple[float, ...] = ()
    """Per grid factor, the held-out harm over the inner folds — the mean over all the groups of the
    judged NDCG a group lost against the identity (0 for a group that did not lose) — when the
    choice was risk-averse (``risk_aversion``); empty otherwise."""


def shrink(p: Parameters, base_interactions: tuple[float, ...], factor: float) -> Parameters:
    """The point ``factor`` of the way from the identity to ``p`` (log-multipliers and interaction weights)."""
    logs = tuple(factor * v for v in p.log_multipliers)
    if p.interactions is None:
        return Parameters(logs, None)
    return Parameters(logs, tuple(b0 + factor * (b - b0) for b, b0 in zip(p.interactions, base_interactions)))


def _judged_ndcg_per_request(objective: PoolObjective, p: Parameters) -> np.ndarray:
    """Judged NDCG@k of each of the objective's requests under ``p``: true NDCG, no margin, no penalty."""
    ranking = objective.pools.rank(p.adjustment())
    ndcg, _ = objective.pools.judged_metrics(ranking, objective.k)
    return ndcg


def group_harm(objective: PoolObjective, differences: np.ndarray) -> float:
    """Total judged NDCG@k the objective's groups lose, from per-request NDCG ``differences``
    against the identity (a group's value is the mean over its requests; groups that gain count 0)."""
    per_group = np.bincount(objective.request_group, differences, minlength=objective.groups)
    return math.fsum(np.maximum(0.0, -per_group / objective.requests_per_group).tolist())


def choose_factor(
    grid: Sequence[float],
    inner_ndcg: Sequence[float],
    inner_harm: Sequence[float] = (),
    risk_aversion: float = 0.0,
) -> float:
    """The grid factor with the best held-out score (ties: the smaller factor); no evidence: the
    smallest. The score is the held-out NDCG less ``risk_aversion`` × the held-out harm (with
    harm measured; else the NDCG alone): a risk-averse choice counts every unit of NDCG a group
    loses 1 + ``risk_aversion`` times, every unit gained once."""
    if not inner_ndcg:
        return min(grid)
    scores = list(inner_ndcg)
    if inner_harm:
        scores = [v - risk_aversion * h for v, h in zip(inner_ndcg, inner_harm, strict=True)]
    best = max(scores)
    return min(f for f, v in zip(grid, scores, strict=True) if v == best)


def inner_folds(groups: int, folds: int, seed: int) -> np.ndarray:
    """Each local group's inner fold: a seeded permutation dealt round-robin (fold sizes differ by at most one)."""
    order = np.random.Generator(np.random.PCG64([seed, INNER_FOLD_STREAM])).permutation(groups)
    fold = np.empty(groups, dtype=np.int64)
    fold[order] = np.arange(groups) % folds
    return fold


ObjectiveFactory = Callable[[PoolSet, np.ndarray], PoolObjective]
"""Builds the training objective over some pools and their local group indices (0 … groups − 1)."""


def shrunk_search(
    requests: Sequence[PoolRequest],
    request_group: np.ndarray,
    objective_for: ObjectiveFactory,
    *,
    family: ProfileFamily,
    seed: int,
    starts: int,
    passes_per_step: int,
    grid: Sequence[float],
    folds: int,
    risk_aversion: float | None = None,
) -> tuple[SearchResult, ShrinkageChoice]:
    """``search`` over ``requests``, its point shrunk toward the identity by the factor inner
    cross-validation over these groups chooses (see the module docstring). Reads nothing but
    ``requests``: the groups it is given are the only labels that choose anything."""
    objective = objective_for(PoolSet(requests), request_group)
    kw = dict(family=family, seed=seed, starts=starts, passes_per_step=passes_per_step)
    found = search(objective, **kw)  # type: ignore[arg-type]
    evaluations = found.evaluations
    groups = objective.groups
    inner = min(folds, groups)
    scores: list[float] = []
    harms: list[float] = []
    averse = risk_aversion is not None
    if len(grid) > 1 and inner >= 2:
        fold = inner_folds(groups, inner, seed)[request_group]
        totals, lost = [0.0] * len(grid), [0.0] * len(grid)
        at_identity = identity(family, objective.base_interactions)
        for k in range(inner):
            fit_rows, test_rows = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
            fit_objective = objective_for(*_subset(requests, request_group, fit_rows))
            test_objective = objective_for(*_subset(requests, request_group, test_rows))
            point = search(fit_objective, **kw).parameters  # type: ignore[arg-type]
            evaluations += fit_objective.evaluations
            base = _judged_ndcg_per_request(test_objective, at_identity) if averse else None
            for j, factor in enumerate(grid):
                ndcg = _judged_ndcg_per_request(test_objective, shrink(point, objective.base_interactions, factor))
                totals[j] += test_objective.groups * test_objective.group_mean(ndcg)
                if base is not None:
                    lost[j] += group_harm(test_objective, ndcg - base)
        scores = [t / groups for t in totals]
        harms = [h / groups for h in lost] if averse else []
    factor = choose_factor(grid, scores, harms, risk_aversion or 0.0)
    choice = ShrinkageChoice(factor, tuple(scores), False, tuple(harms))
    if factor == 1.0:  # the search's own point, bit for bit
        return dataclasses.replace(found, evaluations=evaluations), choice
    point = shrink(found.parameters, objective.base_interactions, factor)
    value = objective.value(point)
    kept_identity = value < found.value_at_identity
    if kept_identity:
        point, value = identity(family, objective.base_interactions), found.value_at_identity
    result = SearchResult(point, found.value_at_identity, value, evaluations + 1)
    return result, dataclasses.replace(choice, kept_identity=kept_identity)


def _subset(requests: Sequence[PoolRequest], request_group: np.ndarray, rows: np.ndarray) -> tuple[PoolSet, np.ndarray]:
    """The pools of ``rows`` and their groups renumbered 0 … (in the order of the original numbers)."""
    kept = request_group[rows]
    _, local = np.unique(kept, return_inverse=True)
    return PoolSet([requests[int(i)] for i in rows]), local.astype(np.int64)
