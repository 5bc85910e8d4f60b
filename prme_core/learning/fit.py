"""Proposed scores, the pairwise objective, the coordinate search and judged metrics.

The candidate family multiplies each applied additive weight (``retrieval.config.WEIGHT_FIELDS``,
lined up with the judged arrays' own layout by name) by a factor in [0.25, 4] and renormalizes
(``retrieval.multipliers``); everything else a receipt recorded —
features, temporal bonus, epistemic factor, node-type boost, relevance cap, rounding, and the
ordered operations (neural blends, session/episode decays, current-update) — is replayed as it
was. Unity reproduces the recorded scores exactly.

Objective (training groups only): for each explicit (positive, negative) pair
z = margin·(s_neg − s_pos) and loss = softplus(z); a request's loss is the mean over its pairs,
a group's the mean over its requests, the objective the mean over groups plus
regularization·Σ (ln m_f)². The comparison objective follows RankNet's pairwise loss; the
optimizer is a deterministic coordinate search in log space (algorithm
``pairwise_weight_multipliers_v1``), not a neural network or gradient method.
"""

from __future__ import annotations

import decimal
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from prme_core.learning.metrics import ndcg_at_k_batch, pairwise_accuracy_batch
from prme_core.learning.observations import Judged
from prme_core.retrieval.formula import weighted_base_scores
from prme_core.retrieval.multipliers import (
    FACTOR_COUNT,
    MAX_MULTIPLIER,
    MIN_MULTIPLIER,
    adjusted_weight_matrix,
    layout_factors,
)

FIT_ALGORITHM = "pairwise_weight_multipliers_v1"
PARALLEL_ROWS = 50_000  # below this, threads cost more than they save
STEP_SCHEDULE = (0.5, 0.25, 0.125, 0.0625)
IMPROVEMENT_EPSILON = 1e-12
_EXACT = decimal.Context(prec=40)
_LOW, _HIGH = (float(_EXACT.ln(decimal.Decimal(b))) for b in (MIN_MULTIPLIER, MAX_MULTIPLIER))


def multipliers_from_logs(log_multipliers: np.ndarray) -> np.ndarray:
    """``exp`` of each log-factor, computed in decimal and rounded once, so every machine gets
    the same bits (numpy's float64 ``exp`` runs CPU-specific SIMD code on AVX-512 hosts and can
    differ from other hosts in the last bit); the clamp ends map to exactly 0.25 and 4."""
    out = np.empty(len(log_multipliers))
    for i, value in enumerate(log_multipliers):
        value = float(value)
        out[i] = (
            MIN_MULTIPLIER
            if value <= _LOW
            else MAX_MULTIPLIER
            if value >= _HIGH
            else float(_EXACT.exp(decimal.Decimal(value)))
        )
    return out


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """The two worker threads the judged fit spreads its work over, started on first use."""
    return ThreadPoolExecutor(max_workers=2, thread_name_prefix="prme-fit")


def proposed_scores(judged: Judged, multipliers: np.ndarray, rows: slice = slice(None)) -> np.ndarray:
    """Judged candidates' scores under ``multipliers`` (bit-identical to retrieval): each
    distinct applied weight set is renormalized once, then the formula runs row-wise."""
    sets, index = judged.weight_sets()
    # multipliers adjust the layout's weights (by name); interaction weights stay as recorded
    layout = judged.layout
    count = len(layout.weights)
    factors = layout_factors(multipliers, layout)
    adjusted = np.hstack([adjusted_weight_matrix(sets[:, :count], factors), sets[:, count:]])
    features = judged.features[rows]
    n = features.shape[0]
    weights = np.broadcast_to(adjusted[0], (n, adjusted.shape[1])) if index is None else adjusted[index[rows]]
    s = weighted_base_scores(features, weights, judged.scalars[rows], layout)
    for layer in judged.layers:
        c, kind = layer.coefficient[rows], layer.kind[rows]
        blended = (1.0 - c) * layer.neural[rows] + c * s
        s = np.where(kind == 1, blended, np.where(kind == 2, s * c, s))
    return s


@dataclass
class PairwiseObjective:
    judged: Judged
    request_group: np.ndarray  # group index of each request of ``judged``
    margin_scale: float
    regularization: float

    def __post_init__(self) -> None:
        self.requests = int(self.request_group.size)
        self.pairs_per_request = np.bincount(self.judged.pair_request, minlength=self.requests).astype(np.float64)
        self.groups = int(self.request_group.max(initial=-1)) + 1
        self.requests_per_group = np.bincount(self.request_group, minlength=self.groups).astype(np.float64)
        half_rows, half_pairs = self.judged.size // 2, self.judged.pair_positive.size // 2
        self._row_parts = (slice(0, half_rows), slice(half_rows, None))
        self._pair_parts = (slice(0, half_pairs), slice(half_pairs, None))
        self._parallel = self.judged.size >= PARALLEL_ROWS

    def _map(self, fn: Callable[[slice], np.ndarray], parts: tuple[slice, slice]) -> list[np.ndarray]:
        """Run ``fn`` on both halves; numpy releases the GIL, so two threads use both cores."""
        if not self._parallel:
            return [fn(parts[0]), fn(parts[1])]
        return list(_pool().map(fn, parts))

    def loss(self, log_multipliers: np.ndarray) -> float:
        m = multipliers_from_logs(log_multipliers)
        scores = np.concatenate(self._map(lambda rows: proposed_scores(self.judged, m, rows), self._row_parts))
        judged, scale = self.judged, self.margin_scale

        def pair_losses(part: slice) -> np.ndarray:
            z = scale * (scores[judged.pair_negative[part]] - scores[judged.pair_positive[part]])
            return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))

        pair_loss = np.concatenate(self._map(pair_losses, self._pair_parts))
        request_loss = (
            np.bincount(self.judged.pair_request, pair_loss, minlength=self.requests) / self.pairs_per_request
        )
        group_loss = np.bincount(self.request_group, request_loss, minlength=self.groups) / self.requests_per_group
        return float(group_loss.mean() + self.regularization * np.sum(log_multipliers**2))


def coordinate_search(objective: PairwiseObjective, passes_per_step: int) -> tuple[np.ndarray, float, float]:
    """Start at unity; for each step of the schedule, up to ``passes_per_step`` passes over the
    factors in ``WEIGHT_FIELDS`` order, trying −step then +step (clamped to [0.25, 4]); a move is
    kept only if it lowers the best loss by more than 1e-12. Returns (multipliers, loss at unity,
    final loss)."""
    current = np.zeros(FACTOR_COUNT)
    best = before = objective.loss(current)
    for step in STEP_SCHEDULE:
        for _ in range(passes_per_step):
            changed = False
            for feature in range(FACTOR_COUNT):
                start = current[feature]
                for move in (-step, step):
                    value = min(max(start + move, _LOW), _HIGH)
                    if value == current[feature]:
                        continue
                    trial = current.copy()
                    trial[feature] = value
                    loss = objective.loss(trial)
                    if loss < best - IMPROVEMENT_EPSILON:
                        best, current, changed = loss, trial, True
            if not changed:
                break
    return multipliers_from_logs(current), before, best


def judged_positions(judged: Judged, scores: np.ndarray) -> np.ndarray:
    """Each judged candidate's 0-based position among its request's judged candidates, ordered
    by the receipt's recorded sort policy applied to ``scores``."""
    reranked_tail = (judged.policy == 1) & ~judged.reranked
    tier = reranked_tail.astype(np.int64)
    uses_path = (judged.policy == 0) | reranked_tail
    path_key = np.where(uses_path, -judged.path, 0.0)
    order = np.lexsort((judged.id_key, path_key, -scores, tier, judged.request))
    sorted_requests = judged.request[order]
    starts = np.searchsorted(sorted_requests, sorted_requests, side="left")
    positions = np.empty(judged.size, dtype=np.int64)
    positions[order] = np.arange(judged.size) - starts
    return positions


def judged_metrics(judged: Judged, scores: np.ndarray, requests: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(judged NDCG@k, pairwise accuracy) per request under ``scores``."""
    positions = judged_positions(judged, scores)
    ndcg = ndcg_at_k_batch(positions, judged.positive, judged.request, requests, k)
    accuracy = pairwise_accuracy_batch(
        positions, judged.pair_positive, judged.pair_negative, judged.pair_request, requests
    )
    return ndcg, accuracy
