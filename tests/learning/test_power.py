"""The power estimate behind "needs about N more judged queries": n80 ≈ (1.96 + 0.84)²·SD²/gain²."""

import math

import numpy as np
import pytest

from prme_core.learning.power import Z_INTERVAL, Z_POWER, groups_for_power


def test_groups_for_power_follows_the_normal_approximation():
    diffs = np.array([0.05, -0.01, 0.03, 0.00, 0.02, 0.04, -0.02, 0.01])
    estimate = groups_for_power(diffs)
    sd, gain = float(diffs.std(ddof=1)), float(diffs.mean())
    assert estimate.gain == pytest.approx(gain) and estimate.sd == pytest.approx(sd)
    assert estimate.groups_for_power == math.ceil((Z_INTERVAL + Z_POWER) ** 2 * sd**2 / gain**2)
    assert estimate.more_groups == estimate.groups_for_power - len(diffs)


def test_a_gain_of_zero_or_less_has_no_number_of_groups():
    assert groups_for_power([0.01, -0.02, 0.0, -0.01]).groups_for_power is None
    assert groups_for_power([0.0, 0.0, 0.0]).more_groups is None


def test_halving_the_gain_needs_four_times_the_groups():
    rng = np.random.default_rng(7)
    noise = rng.normal(0.0, 0.1, 200)
    noise -= noise.mean()
    big, small = groups_for_power(noise + 0.04), groups_for_power(noise + 0.02)
    assert small.groups_for_power == pytest.approx(4 * big.groups_for_power, rel=0.02)


def test_enough_groups_already_means_none_more():
    diffs = [0.10, 0.11, 0.09, 0.10, 0.12, 0.08]
    estimate = groups_for_power(diffs)
    assert estimate.groups_for_power == 2 and estimate.more_groups == 0
