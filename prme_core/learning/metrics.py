"""Ranking metrics with binary relevance, as pure numpy functions: the one home of each.

``ndcg_at_k``: DCG = Σ over the first k positions i (0-based) holding a relevant item of
1/log2(i + 2); IDCG is the same sum over min(k, number relevant) positions; 0 when nothing is
relevant. ``recall_at_k`` = relevant items in the first k / all relevant items. ``mrr_at_k`` =
1/(1 + position of the first relevant item in the first k), else 0. ``pairwise_accuracy`` =
the share of (positive, negative) pairs with the positive strictly ahead.

``ndcg_at_k_batch`` and ``pairwise_accuracy_batch`` compute the same measures for many rankings
at once (the fit's judged metrics). The batched NDCG adds its gains in a different order than
``ndcg_at_k`` (``bincount`` and ``cumsum`` against numpy's pairwise ``sum``), so the two may
differ in the last bit: each stays as it is, because saved reports and the committed LoCoMo
results record their exact values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_DISCOUNTS = 1.0 / np.log2(np.arange(2, 10_002, dtype=np.float64))


def discounts(k: int) -> np.ndarray:
    """1/log2(i + 2) for i in 0..k-1."""
    if k <= _DISCOUNTS.size:
        return _DISCOUNTS[:k]
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def ndcg_at_k(relevant_flags: Sequence[bool] | np.ndarray, total_relevant: int, k: int) -> float:
    """NDCG@k of one ranking given its relevance flags in rank order."""
    if total_relevant <= 0:
        return 0.0
    flags = np.asarray(relevant_flags, dtype=bool)[:k]
    d = discounts(k)
    dcg = float(np.sum(d[: flags.size][flags]))
    idcg = float(np.sum(d[: min(k, total_relevant)]))
    return dcg / idcg


def recall_at_k(relevant_flags: Sequence[bool] | np.ndarray, total_relevant: int, k: int) -> float:
    if total_relevant <= 0:
        return 0.0
    return float(np.count_nonzero(np.asarray(relevant_flags, dtype=bool)[:k])) / total_relevant


def mrr_at_k(relevant_flags: Sequence[bool] | np.ndarray, k: int) -> float:
    hits = np.flatnonzero(np.asarray(relevant_flags, dtype=bool)[:k])
    return 0.0 if hits.size == 0 else 1.0 / (1.0 + float(hits[0]))


def ndcg_at_k_batch(
    positions: np.ndarray,
    relevant: np.ndarray,
    ranking: np.ndarray,
    rankings: int,
    k: int,
    totals: np.ndarray | None = None,
) -> np.ndarray:
    """NDCG@k of ``rankings`` rankings at once, one value per ranking (0 where none is relevant).

    Item i sits at 0-based ``positions[i]`` of ranking ``ranking[i]`` and is relevant when
    ``relevant[i]``; the ideal ranking counts every relevant item listed for that ranking, or
    ``totals[r]`` relevant items when given (relevant items no ranking could hold)."""
    table = discounts(max(k, 1))
    gains = np.where(relevant & (positions < k), table[np.minimum(positions, k - 1)], 0.0)
    dcg = np.bincount(ranking, gains, minlength=rankings)
    n_relevant = (
        np.bincount(ranking, relevant.astype(np.float64), minlength=rankings).astype(np.int64)
        if totals is None
        else np.asarray(totals, dtype=np.int64)
    )
    ideal = np.concatenate([[0.0], np.cumsum(table)])[np.minimum(n_relevant, k)]
    return np.divide(dcg, ideal, out=np.zeros(rankings), where=ideal > 0)


def pairwise_accuracy_batch(
    positions: np.ndarray, pair_positive: np.ndarray, pair_negative: np.ndarray, pair_ranking: np.ndarray, rankings: int
) -> np.ndarray:
    """Per ranking, the share of its (positive, negative) pairs — item indices into ``positions``,
    pair j belonging to ranking ``pair_ranking[j]`` — with the positive strictly ahead (0 without pairs)."""
    ahead = (positions[pair_positive] < positions[pair_negative]).astype(np.float64)
    pairs = np.bincount(pair_ranking, minlength=rankings).astype(np.float64)
    return np.divide(
        np.bincount(pair_ranking, ahead, minlength=rankings), pairs, out=np.zeros(rankings), where=pairs > 0
    )


def pairwise_accuracy(positions_positive: np.ndarray, positions_negative: np.ndarray) -> float:
    """Share of all (p, n) pairs with p ranked strictly ahead of n (positions are 0-based)."""
    p, n = np.asarray(positions_positive), np.asarray(positions_negative)
    positive, negative = np.divmod(np.arange(p.size * n.size), n.size)  # every pair, as item indices
    one_ranking = np.zeros(positive.size, dtype=np.int64)
    return float(pairwise_accuracy_batch(np.concatenate([p, n]), positive, p.size + negative, one_ranking, 1)[0])
