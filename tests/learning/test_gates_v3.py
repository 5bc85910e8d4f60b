"""Screen and confirm (version-3 reports): constructed per-group differences show that a true
gain passes at the stated volume and that noise does not, on one look and over many looks."""

from __future__ import annotations

import numpy as np
import pytest

from prme_core.learning.bootstrap import sign_flip_p_value
from prme_core.learning.full_retrieval import DEFAULT_ALPHA_BUDGET, FullRetrievalEvaluationConfig
from prme_core.learning.gates import confirm_decision, look_alpha, regression_harm, screen_decision
from prme_core.learning.power import groups_for_power

SCREEN = 0.2
PASSED = {"improved_on_observed_candidates", "improved_full_retrieval"}


def paired(rng: np.random.Generator, n: int, gain: float, *, changed: float = 0.35, spread: float = 0.3) -> np.ndarray:
    """Per-group differences of a profile that changes ``changed`` of the rankings: the changed
    groups move by ±``spread``·|N(0, 1)|-like amounts around a mean that gives ``gain`` overall."""
    d = np.zeros(n)
    moved = rng.random(n) < changed
    d[moved] = rng.normal(gain / changed, spread, int(moved.sum()))
    return np.clip(d, -1.0, 1.0)


MIN_GAIN = 0.01


def p_value(d: np.ndarray, samples: int) -> float:
    """The sign-flip p-value where the decision reads it: both gates refuse a mean gain below
    ``MIN_GAIN`` whatever the p-value, so there 1.0 stands in (the same decisions, and the long
    seasons below skip about three quarters of their randomization tests)."""
    return sign_flip_p_value(d, samples=samples, seed=42) if d.mean() >= MIN_GAIN else 1.0


def screen(d: np.ndarray, level: float = SCREEN) -> str:
    return screen_decision(
        enough_groups=True,
        ndcg_gain=float(d.mean()),
        pairwise_gain=0.0,
        min_ndcg_gain=MIN_GAIN,
        p_value=p_value(d, 2000),
        max_p_value=level,
    )


def confirm(d: np.ndarray, look: int, budget: float = DEFAULT_ALPHA_BUDGET) -> str:
    return confirm_at(d, look_alpha(budget, look))


def confirm_at(d: np.ndarray, alpha: float) -> str:
    harm, _, severe = regression_harm(d, 0.5)
    return confirm_decision(
        enough_groups=True,
        ndcg_gain=float(d.mean()),
        recall_gain=0.0,
        min_ndcg_gain=MIN_GAIN,
        harm=harm,
        max_mean_harm=0.05,
        severe_share=severe,
        max_severe_share=0.05,
        p_value=p_value(d, 10_000),
        alpha=alpha,
    )


def test_the_looks_spend_half_the_budget_then_a_sixth_and_never_more_than_all_of_it():
    assert look_alpha(0.05, 1) == pytest.approx(0.025)
    assert look_alpha(0.05, 2) == pytest.approx(0.05 / 6)
    assert sum(look_alpha(0.05, k) for k in range(1, 10_001)) == pytest.approx(0.05 * 10_000 / 10_001)
    with pytest.raises(ValueError, match="numbered from 1"):
        look_alpha(0.05, 0)


def test_a_true_validation_gain_passes_the_screen_at_the_volume_its_power_figure_names():
    rng = np.random.default_rng(1)
    sample = paired(rng, 4000, 0.03)
    needed = groups_for_power(sample, alpha=SCREEN).groups_for_power
    assert 60 <= needed <= 160  # (0.84 + 0.84)² · 0.18² / 0.03²
    passed = np.mean([screen(paired(rng, needed, 0.03)) in PASSED for _ in range(300)])
    assert passed >= 0.75, passed  # 80% by the normal approximation; 300 draws


def test_noise_passes_the_screen_at_most_at_its_level():
    rng = np.random.default_rng(2)
    passed = np.mean([screen(paired(rng, 120, 0.0)) in PASSED for _ in range(400)])
    assert passed <= SCREEN + 0.05, passed


def test_a_true_holdout_gain_is_confirmed_on_the_first_look_with_300_groups():
    rng = np.random.default_rng(3)
    passed = np.mean([confirm(paired(rng, 300, 0.03, changed=0.25, spread=0.25), 1) in PASSED for _ in range(200)])
    assert passed >= 0.8, passed


def test_noise_is_confirmed_on_a_look_at_most_at_that_looks_level():
    rng = np.random.default_rng(4)
    for look in (1, 3):
        passed = np.mean([confirm(paired(rng, 300, 0.0, changed=0.25), look) in PASSED for _ in range(1000)])
        assert passed <= look_alpha(DEFAULT_ALPHA_BUDGET, look) + 0.015, (look, passed)


def test_screen_and_confirm_together_let_noise_through_at_most_at_the_product_of_their_levels():
    """One look: the screen and the holdout judge disjoint groups, so noise passes both at most
    at 0.2 × 0.025 = 0.5%."""
    rng = np.random.default_rng(5)
    both = sum(
        screen(paired(rng, 100, 0.0)) in PASSED and confirm(paired(rng, 300, 0.0, changed=0.25), 1) in PASSED
        for _ in range(2000)
    )
    assert both / 2000 <= SCREEN * look_alpha(DEFAULT_ALPHA_BUDGET, 1) + 0.004, both


def test_a_long_season_of_looks_at_noise_stays_within_the_budget():
    """Forty nights, every one screened and every passing screen a new holdout look: the
    season's chance of confirming noise stays under the 5% budget (the worst case, independent
    looks; reusing one holdout only correlates them)."""
    rng = np.random.default_rng(6)
    seasons, confirmed = 400, 0
    for _ in range(seasons):
        look = 0
        for _night in range(40):
            if screen(paired(rng, 100, 0.0)) not in PASSED:
                continue
            look += 1
            if confirm(paired(rng, 300, 0.0, changed=0.25), look) in PASSED:
                confirmed += 1
                break
    assert confirmed / seasons <= DEFAULT_ALPHA_BUDGET, confirmed


def test_a_version_3_configuration_derives_its_level_from_the_budget_and_the_look():
    cfg = FullRetrievalEvaluationConfig().resolved(look=2)
    assert (cfg.look, cfg.alpha_budget, cfg.max_p_value) == (2, DEFAULT_ALPHA_BUDGET, pytest.approx(0.05 / 6))
    assert FullRetrievalEvaluationConfig(alpha_budget=0.1).resolved().max_p_value == pytest.approx(0.05)
    with pytest.raises(ValueError, match="alpha_budget"):
        FullRetrievalEvaluationConfig(max_p_value=0.025).resolved(look=3)
