"""The score formulas, post-score operations and sort policies, as pure numpy functions.

Retrieval and replay both call these, so a replayed score is the recorded score by
construction. Operations are elementwise and written in one fixed order (no reductions whose
summation order could vary), which keeps every result bit-identical across runs and machines.

Formula 1 (weighted sum), per candidate (features and weights in ``prme_core.features`` order):
    additive = w_sem·sem + w_lex·lex + w_graph·graph + w_rec·rec + w_sal·sal + w_conf·conf
               (+ β_cov·coverage + β_bi·bigrams + β_ent·entities from layout 2 on;
               summed left to right over the additive features)
    score    = (additive × epistemic + temporal_boost × temporal_affinity) × node_type_boost
    score    = min(score, sem + lex) when relevance_floor > 0 and sem + lex < relevance_floor
    score    = round(score, 10)
Formula 2 (rank fusion, RFC-0005 §7.2): Σ 1/(k + rank) over the semantic and lexical channels,
scaled by (k + 1)/2 so first on both channels is 1, times the pool-relative epistemic,
node-type and temporal factors, rounded to 10 decimals.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import reduce
from typing import Any, Literal

import numpy as np

from prme_core.features import FeatureLayout, layout_of_width

ROUND_DECIMALS = 10
SortPolicy = Literal["score_path_id", "reranked_prefix", "score_id"]


def round_scores(values: np.ndarray) -> np.ndarray:
    """Round to 10 decimals (numpy's rounding; the only rounding PRME scores ever get)."""
    return np.round(np.asarray(values, dtype=np.float64), ROUND_DECIMALS)


def weighted_base_scores(
    features: np.ndarray, weights: np.ndarray, scalars: np.ndarray, layout: FeatureLayout | None = None
) -> np.ndarray:
    """Formula 1 for n candidates.

    ``features`` (n, ``layout.width``): the layout's ``features`` (weighted, factors, then any
    interactions); ``layout`` is the one the array was built in (None: the registered layout of
    that width, for bare arrays). ``weights`` (n, ``len(layout.weights)``) or (n,
    ``len(layout.additive)``): the applied additive weights in ``layout.additive`` order
    (``FeatureLayout.weight_vector``). ``scalars`` (n, 2): temporal_boost, relevance_floor.
    Interaction terms are added after the weighted ones, so zero interaction weights give
    exactly the score without them.
    """
    f = features
    w = weights
    layout = layout or layout_of_width(f.shape[1])
    count = len(layout.weights)
    offset = layout.interaction_offset
    additive = reduce(operator.add, (w[:, i] * f[:, i] for i in range(count)))
    for j in range(w.shape[1] - count):
        additive = additive + w[:, count + j] * f[:, offset + j]
    score = additive * f[:, layout.index("epistemic_weight")]
    score = score + scalars[:, 0] * f[:, layout.index("temporal_affinity")]
    score = score * f[:, layout.index("node_type_boost")]
    relevance = f[:, layout.index("semantic")] + f[:, layout.index("lexical")]
    floor = scalars[:, 1]
    capped = np.where((floor > 0.0) & (relevance < floor), np.minimum(score, relevance), score)
    return round_scores(capped)


def rank_fused_scores(
    semantic_rank: np.ndarray, lexical_rank: np.ndarray, factors: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """Formula 2 for n candidates. Ranks are ≥ 1, or 0 for "not on that channel";
    ``factors`` (n, 3): epistemic, node-type and temporal factors in [0, 1]."""
    kf = k.astype(np.float64)
    fused = np.where(semantic_rank > 0, 1.0 / (kf + semantic_rank), 0.0)
    fused = fused + np.where(lexical_rank > 0, 1.0 / (kf + lexical_rank), 0.0)
    fused = fused * ((kf + 1.0) / 2.0)
    return round_scores(fused * factors[:, 0] * factors[:, 1] * factors[:, 2])


def apply_adjustment(score: float, kind: str, coefficient: float, neural_score: float | None) -> float:
    """One recorded post-score operation (no rounding afterwards)."""
    if kind == "neural_blend":
        return (1.0 - coefficient) * float(neural_score) + coefficient * score  # type: ignore[arg-type]
    return score * coefficient


def apply_adjustments(base: float, adjustments: Sequence[Any]) -> float:
    """Apply recorded operations (objects with kind/coefficient/neural_score) in order."""
    score = float(base)
    for op in adjustments:
        score = apply_adjustment(score, op.kind, op.coefficient, op.neural_score)
    return score


def sort_key(policy: SortPolicy, score: float, path_score: float, node_id: int, reranked: bool) -> tuple:
    """The ordering key of one candidate under a recorded sort policy (ascending sort).

    ``node_id`` is the UUID's integer value: canonical UUID strings are fixed-width lowercase
    hex, so integer order and string order are the same, and the integer is far cheaper.
    """
    if policy == "score_path_id":
        return (0, -score, -path_score, node_id)
    if policy == "reranked_prefix":
        return (0, -score, 0.0, node_id) if reranked else (1, -score, -path_score, node_id)
    return (0, -score, 0.0, node_id)
