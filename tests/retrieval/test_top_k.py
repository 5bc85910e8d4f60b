"""Candidate channels keep the k highest positive eligible scores, ties broken by corpus order:
the partition-based selection equals a full sort on any input, ties and all."""

from __future__ import annotations

import numpy as np
import pytest

from prme_core.retrieval.candidates import _top_k


def _by_sorting(scores: np.ndarray, eligible: np.ndarray, k: int) -> np.ndarray:
    candidates = np.flatnonzero(eligible & (scores > 0.0))
    order = np.lexsort((candidates, -scores[candidates]))
    return np.sort(candidates[order[:k]])


@pytest.mark.parametrize("seed", range(40))
def test_top_k_equals_a_full_sort_with_ties_and_ineligible_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    # few distinct values: many ties at the k-th score; some zero, negative and NaN scores
    scores = rng.integers(-2, 6, n).astype(np.float64) / 4.0
    scores[rng.random(n) < 0.05] = np.nan
    eligible = rng.random(n) < 0.8
    for k in (1, 5, 50, n + 1):
        assert np.array_equal(_top_k(scores, eligible, k), _by_sorting(scores, eligible, k))


def test_top_k_of_continuous_scores_equals_a_full_sort() -> None:
    rng = np.random.default_rng(7)
    scores = rng.random(10_000)
    eligible = rng.random(10_000) < 0.9
    assert np.array_equal(_top_k(scores, eligible, 50), _by_sorting(scores, eligible, 50))
