"""The holdout gate bounds the harm of regressions (version-2 reports), not the share of groups
that regressed: constructed per-group differences show what passes and what fails."""

from __future__ import annotations

import numpy as np
import pytest

from prme_core.learning.bootstrap import bootstrap_interval
from prme_core.learning.full_retrieval import HARM_DEFAULTS
from prme_core.learning.gates import holdout_decision, regression_harm


def decide(differences, **bounds):
    d = np.asarray(differences, dtype=np.float64)
    harm, _, severe = regression_harm(d, bounds.pop("severe_loss", HARM_DEFAULTS["severe_loss"]))
    low, _ = bootstrap_interval(d, samples=2000, seed=42)
    rules = {
        "max_mean_harm": HARM_DEFAULTS["max_mean_harm"],
        "max_severe_share": HARM_DEFAULTS["max_severe_share"],
        **bounds,
    }
    return holdout_decision(
        enough_groups=True,
        ndcg_gain=float(d.mean()),
        interval_low=low,
        recall_gain=0.0,
        min_ndcg_gain=0.01,
        harm=harm,
        severe_share=severe,
        **rules,
    )


def many_small_regressions_under_a_large_gain(n: int = 400) -> np.ndarray:
    """21% of groups gain 0.3, 11% lose 0.05 (a profile that reorders a third of the rankings)."""
    d = np.zeros(n)
    d[: int(0.21 * n)] = 0.3
    d[int(0.21 * n) : int(0.32 * n)] = -0.05
    return d


def a_minority_badly_hurt(n: int = 400) -> np.ndarray:
    """A larger net gain, but 8% of groups lose their relevant memory from the top (−0.63 to −1)."""
    d = np.zeros(n)
    d[: int(0.30 * n)] = 0.4
    d[int(0.30 * n) : int(0.38 * n)] = np.linspace(-0.63, -1.0, int(0.38 * n) - int(0.30 * n))
    return d


def test_a_large_net_gain_with_many_tiny_regressions_passes():
    d = many_small_regressions_under_a_large_gain()
    harm, benefit, severe = regression_harm(d, 0.5)
    assert harm == pytest.approx(0.11 * 0.05) and benefit == pytest.approx(0.21 * 0.3) and severe == 0.0
    assert decide(d) == "improved_full_retrieval"


def test_the_flat_regressed_share_rule_would_have_blocked_it_more_surely_as_evidence_grows():
    for n in (100, 400, 1600):
        d = many_small_regressions_under_a_large_gain(n)
        flat = holdout_decision(
            enough_groups=True,
            ndcg_gain=float(d.mean()),
            interval_low=bootstrap_interval(d, samples=2000, seed=42)[0],
            recall_gain=0.0,
            min_ndcg_gain=0.01,
            regression_fraction=float(np.mean(d < 0)),
            max_regression_fraction=0.1,
        )
        assert flat == "no_improvement" and decide(d) == "improved_full_retrieval"


def test_a_profile_that_badly_hurts_a_minority_fails_even_with_a_positive_net_gain():
    d = a_minority_badly_hurt()
    harm, _, severe = regression_harm(d, 0.5)
    assert d.mean() > 0.01 and bootstrap_interval(d, samples=2000, seed=42)[0] > 0
    assert severe == pytest.approx(0.08) and harm > HARM_DEFAULTS["max_mean_harm"]
    assert decide(d) == "no_improvement"
    assert decide(d, max_mean_harm=1.0) == "no_improvement"  # the worst-case guard alone stops it
    assert decide(d, max_mean_harm=1.0, max_severe_share=0.1) == "improved_full_retrieval"


def test_spread_out_harm_beyond_the_bound_fails_without_any_severe_loss():
    d = np.zeros(400)
    d[:200] = 0.2
    d[200:400] = -0.08  # half the groups lose a little: harm 0.04 > 0.02
    harm, _, severe = regression_harm(d, 0.5)
    assert severe == 0.0 and harm == pytest.approx(0.04)
    assert decide(d) == "no_improvement" and decide(d, max_mean_harm=0.05) == "improved_full_retrieval"


def test_the_gain_and_interval_rules_still_come_first():
    d = np.full(100, 0.005)
    assert decide(d) == "no_improvement"  # below the minimum gain, however harmless
    assert (
        holdout_decision(
            enough_groups=False,
            ndcg_gain=None,
            interval_low=None,
            recall_gain=None,
            min_ndcg_gain=0.01,
            harm=None,
            max_mean_harm=0.02,
        )
        == "insufficient_data"
    )


# --- the paired sign-flip test beside the bootstrap -------------------------------------------

from prme_core.learning.bootstrap import sign_flip_p_value  # noqa: E402
from prme_core.learning.gates import offline_decision  # noqa: E402


def test_the_sign_flip_p_value_is_exact_for_few_changed_groups_and_seeded_beyond():
    few = np.array([0.3] * 4 + [0.0] * 21)
    assert sign_flip_p_value(few, samples=2000, seed=42) == 1 / 16
    assert sign_flip_p_value(np.zeros(10), samples=2000, seed=42) == 1.0
    many = np.concatenate([np.full(20, 0.05), np.full(10, -0.02)])
    p = sign_flip_p_value(many, samples=2000, seed=42)
    assert p == sign_flip_p_value(many, samples=2000, seed=42) and 0 < p < 0.01
    assert sign_flip_p_value(-many, samples=2000, seed=42) > 0.99


def test_few_changed_groups_on_one_side_pass_the_bootstrap_but_not_the_sign_flip_test():
    d = np.array([0.3] * 4 + [0.0] * 21)  # 4 of 25 validation groups better, none worse
    low, _ = bootstrap_interval(d, samples=2000, seed=42)
    common = dict(
        enough_groups=True, ndcg_gain=float(d.mean()), interval_low=low, pairwise_gain=0.0, min_ndcg_gain=0.01
    )
    assert low > 0 and offline_decision(**common) == "improved_on_observed_candidates"  # version-1 rule
    p = sign_flip_p_value(d, samples=2000, seed=42)
    assert offline_decision(**common, p_value=p, max_p_value=0.025) == "no_improvement"
    d8 = np.array([0.3] * 8 + [0.0] * 17)
    p8 = sign_flip_p_value(d8, samples=2000, seed=42)
    assert (
        p8 == 1 / 256
        and offline_decision(**{**common, "ndcg_gain": float(d8.mean())}, p_value=p8, max_p_value=0.025)
        == "improved_on_observed_candidates"
    )


def test_the_holdout_gate_needs_the_sign_flip_test_too():
    d = np.array([0.3] * 4 + [0.0] * 21)
    assert decide(d) == "improved_full_retrieval"  # harm and severe share alone
    p = sign_flip_p_value(d, samples=2000, seed=42)
    assert decide(d, p_value=p, max_p_value=0.025) == "no_improvement"
