"""Ranking metrics with binary relevance, as pure numpy functions.

``ndcg_at_k``: DCG = Σ over the first k positions i (0-based) holding a relevant item of
1/log2(i + 2); IDCG is the same sum over min(k, number relevant) positions; 0 when nothing is
relevant. ``recall_at_k`` = relevant items in the first k / all relevant items. ``mrr_at_k`` =
1/(1 + position of the first relevant item in the first k), else 0. ``pairwise_accuracy`` =
the share of (positive, negative) pairs with the positive strictly ahead.
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


def pairwise_accuracy(positions_positive: np.ndarray, positions_negative: np.ndarray) -> float:
    """Share of all (p, n) pairs with p ranked strictly ahead of n (positions are 0-based)."""
    p = np.asarray(positions_positive)[:, None]
    n = np.asarray(positions_negative)[None, :]
    total = p.size * n.size
    return float(np.count_nonzero(p < n)) / total if total else 0.0
