"""Ranking metrics against ranx and by hand; pairwise accuracy; the seeded paired bootstrap."""

import math
import random

import numpy as np
import pytest
from ranx import Qrels, Run, evaluate

from prme_core.learning.bootstrap import bootstrap_interval
from prme_core.learning.metrics import mrr_at_k, ndcg_at_k, pairwise_accuracy, recall_at_k


def _random_runs(seed: int, queries: int = 200):
    """Random rankings over a 40-document pool; relevant sets may include unranked documents."""
    rng = random.Random(seed)
    runs, qrels = {}, {}
    for q in range(queries):
        pool = [f"d{i}" for i in range(40)]
        ranking = rng.sample(pool, rng.randint(1, 30))
        relevant = rng.sample(pool, rng.randint(1, 12))
        runs[f"q{q}"] = ranking
        qrels[f"q{q}"] = set(relevant)
    return runs, qrels


@pytest.mark.parametrize("k", [1, 5, 10])
def test_ndcg_recall_and_mrr_agree_with_ranx_on_random_runs(k):
    rankings, relevant = _random_runs(seed=k)
    qrels = Qrels({q: {d: 1 for d in rel} for q, rel in relevant.items()})
    run = Run({q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in rankings.items()})
    metrics = [f"ndcg@{k}", f"recall@{k}", f"mrr@{k}"]
    evaluate(qrels, run, metrics)
    for q, ranking in rankings.items():
        flags = [d in relevant[q] for d in ranking]
        n = len(relevant[q])
        assert ndcg_at_k(flags, n, k) == pytest.approx(run.scores[f"ndcg@{k}"][q], abs=1e-9)
        assert recall_at_k(flags, n, k) == pytest.approx(run.scores[f"recall@{k}"][q], abs=1e-9)
        assert mrr_at_k(flags, k) == pytest.approx(run.scores[f"mrr@{k}"][q], abs=1e-9)


def test_one_relevant_item_in_second_place_scores_by_hand():
    flags = [False, True, False]
    assert ndcg_at_k(flags, 1, 10) == pytest.approx(1 / math.log2(3))
    assert recall_at_k(flags, 1, 10) == 1.0
    assert mrr_at_k(flags, 10) == 0.5


def test_ideal_dcg_counts_only_min_of_k_and_relevant_positions():
    assert ndcg_at_k([True, True, False], 3, 2) == pytest.approx(1.0)
    assert ndcg_at_k([True, False, True], 2, 3) == pytest.approx((1 + 1 / 2) / (1 + 1 / math.log2(3)))
    assert recall_at_k([True, True, False], 4, 2) == 0.5


def test_relevant_items_beyond_k_do_not_count():
    flags = [False, False, True]
    assert ndcg_at_k(flags, 1, 2) == 0.0 and recall_at_k(flags, 1, 2) == 0.0 and mrr_at_k(flags, 2) == 0.0


def test_metrics_are_zero_without_relevant_items_or_results():
    assert ndcg_at_k([False, False], 0, 5) == 0.0 and recall_at_k([], 0, 5) == 0.0
    assert ndcg_at_k([], 3, 5) == 0.0 and mrr_at_k([], 5) == 0.0


def test_pairwise_accuracy_counts_positives_strictly_ahead_of_negatives():
    assert pairwise_accuracy(np.array([0, 1]), np.array([2, 3])) == 1.0
    assert pairwise_accuracy(np.array([3]), np.array([0, 1])) == 0.0
    assert pairwise_accuracy(np.array([0, 2]), np.array([1])) == 0.5
    assert pairwise_accuracy(np.array([1]), np.array([1])) == 0.0


def test_pairwise_accuracy_without_pairs_is_zero():
    assert pairwise_accuracy(np.array([], dtype=int), np.array([1])) == 0.0


def test_bootstrap_interval_is_deterministic_for_a_seed():
    d = np.random.default_rng(3).normal(0.05, 0.2, size=37)
    first = bootstrap_interval(d, samples=2000, seed=42)
    assert bootstrap_interval(d.copy(), samples=2000, seed=42) == first
    assert bootstrap_interval(d, samples=2000, seed=43) != first
    assert first[0] <= float(d.mean()) <= first[1]


def test_bootstrap_interval_of_constant_differences_is_that_constant():
    assert bootstrap_interval(np.full(25, 0.3), samples=500, seed=1) == pytest.approx((0.3, 0.3), abs=1e-15)


def test_bootstrap_interval_needs_a_difference():
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_interval(np.array([]), samples=100, seed=0)
