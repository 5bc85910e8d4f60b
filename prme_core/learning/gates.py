"""The gate decisions, as pure functions. Report models call them to re-derive their own
decision on load; Dagster asset checks call them to enforce the gates.

Version-3 proposals (what new evaluations write): the offline gate judges every judged group,
not only the validation share — the proposal on the validation groups and, for each training
group, a proposal fitted on the other training folds (cross-fitting; no validation label ever
fits anything) — with a one-sided paired sign-flip test at ``max_p_value`` (0.025).

The separate full-retrieval holdout confirms with its own one-sided sign-flip test. The two
tests judge disjoint queries, so for a proposal without a true gain, passing the offline gate
(probability at most its level *a*) and then the holdout at level *h* has probability at most
*a · h*. Version-4 holdout reports (what the pipeline writes) spend their error budget *B*
(0.05) over the partition's *proposals* with that product in mind (``holdout_level``): the
holdout of the partition's t-th recorded proposal may test at ``min(cap, c / (t (t + 1)))``
(cap 0.025), and the j-th look at the same proposal against the same baseline at that times
``2 / (j (j + 1))``. ``c`` is the largest constant for which ``2 a Σ_t min(cap, c / (t (t + 1)))
≤ B`` (``level_constant``; 10.5 at the defaults), so every night of the partition's life
together accepts a proposal without a true gain with probability at most B: the first twenty
nights' proposals confirm at the full 2.5%, later ones at a slowly shrinking level, and a
10-night season at most 2a · 10 · cap = 1.25%. Version-3 holdout reports (a holdout of a
proposal this store did not record, and earlier reports) spend the budget over the holdout's
looks alone (``look_alpha``: the k-th look of a partition and baseline ``B / (k (k + 1))``).
Version-2 reports keep their rules (a bootstrap interval and a sign-flip test at 2.5% on the
validation groups alone, every look judged alone)."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

OfflineDecision = Literal["insufficient_data", "no_improvement", "improved_on_observed_candidates"]
HoldoutDecision = Literal["insufficient_data", "no_improvement", "improved_full_retrieval"]
TOLERANCE = 1e-12


def offline_decision(
    *,
    enough_groups: bool,
    ndcg_gain: float | None,
    interval_low: float | None,
    pairwise_gain: float | None,
    min_ndcg_gain: float,
    p_value: float | None = None,
    max_p_value: float | None = None,
) -> OfflineDecision:
    """Improvement needs the minimum mean validation NDCG gain, a positive bootstrap lower
    endpoint and no mean pairwise-accuracy regression; version-2 reports (``max_p_value``
    given) also need the paired sign-flip test's one-sided p-value at most ``max_p_value``."""
    if not enough_groups:
        return "insufficient_data"
    assert ndcg_gain is not None and interval_low is not None and pairwise_gain is not None
    if max_p_value is not None and not (p_value is not None and p_value <= max_p_value):
        return "no_improvement"
    if ndcg_gain >= min_ndcg_gain and interval_low > 0.0 and pairwise_gain >= -TOLERANCE:
        return "improved_on_observed_candidates"
    return "no_improvement"


def screen_decision(
    *,
    enough_groups: bool,
    ndcg_gain: float | None,
    pairwise_gain: float | None,
    min_ndcg_gain: float,
    p_value: float | None,
    max_p_value: float,
    proposal_gain: float | None = None,
    proposal_upper: float | None = None,
) -> OfflineDecision:
    """The version-3 offline gate over its evidence (the validation groups and the cross-fitted
    training groups): the minimum mean NDCG gain, no mean pairwise-accuracy regression, the
    groups' one-sided paired sign-flip p-value at most ``max_p_value``, and the proposal itself
    not worse on the validation groups: its mean gain there not negative (``proposal_gain``, the
    ``mean`` check of earlier reports) or the upper endpoint of its bootstrap interval there not
    negative (``proposal_upper``, the ``interval`` check: not measurably worse). A profile also
    needs a confirming holdout."""
    if not enough_groups:
        return "insufficient_data"
    assert ndcg_gain is not None and pairwise_gain is not None and p_value is not None
    if proposal_gain is not None and proposal_gain < -TOLERANCE:
        return "no_improvement"
    if proposal_upper is not None and proposal_upper < -TOLERANCE:
        return "no_improvement"
    if ndcg_gain >= min_ndcg_gain and pairwise_gain >= -TOLERANCE and p_value <= max_p_value:
        return "improved_on_observed_candidates"
    return "no_improvement"


def look_alpha(budget: float, look: int) -> float:
    """The error a partition's ``look``-th holdout look may spend: ``budget / (look (look + 1))``
    (half the budget on the first look, a sixth on the second, …); the looks together never
    spend more than ``budget``."""
    if look < 1:
        raise ValueError(f"a holdout look is numbered from 1, got {look}")
    return budget / (look * (look + 1))


DEFAULT_LEVEL_CAP = 0.025
"""The most a version-4 holdout look may test at (one-sided): the level of every single gate."""


def level_constant(budget: float, offline_alpha: float, cap: float) -> float:
    """The largest ``c`` for which the partition's holdout levels ``min(cap, c / (t (t + 1)))``,
    each after an offline gate at ``offline_alpha`` and with its repeated looks (factor 2),
    together spend at most ``budget``: ``2 · offline_alpha · Σ_t min(cap, c / (t (t + 1))) ≤ budget``.

    With the first ``T`` proposals at the cap the sum is ``cap · T + c / (T + 1)`` (the tail
    telescopes), which must stay within ``S = budget / (2 · offline_alpha)``: ``c = (S − cap · T)
    (T + 1)`` for the largest ``T`` at which that still puts the T-th proposal at the cap
    (``c ≥ cap · T (T + 1)``); with no proposal at the cap, ``c = S``."""
    if not (0.0 < budget and 0.0 < offline_alpha <= 1.0 and 0.0 < cap <= 1.0):
        raise ValueError(f"budget, offline_alpha and cap must be positive (got {budget}, {offline_alpha}, {cap})")
    share = budget / (2.0 * offline_alpha)
    best = share
    for t in range(1, 1_000_000):
        at_cap = (share - cap * t) * (t + 1)
        if at_cap < cap * t * (t + 1):
            break
        best = at_cap
    return best


def holdout_level(
    offline_look: int, look: int, *, budget: float, offline_alpha: float, cap: float = DEFAULT_LEVEL_CAP
) -> float:
    """The level the ``look``-th holdout look at the partition's ``offline_look``-th recorded
    proposal may test at (version 4): ``min(cap, c / (t (t + 1))) · 2 / (j (j + 1))``."""
    if offline_look < 1 or look < 1:
        raise ValueError(f"offline and holdout looks are numbered from 1, got {offline_look} and {look}")
    c = level_constant(budget, offline_alpha, cap)
    t, j = offline_look, look
    return min(cap, c / (t * (t + 1))) * 2.0 / (j * (j + 1))


def lifetime_bound(
    budget: float, offline_alpha: float, cap: float = DEFAULT_LEVEL_CAP, proposals: int | None = None
) -> float:
    """The bound on accepting a proposal without a true gain over ``proposals`` nights (None:
    the partition's whole life): ``2 · offline_alpha · Σ_t min(cap, c / (t (t + 1)))``."""
    c = level_constant(budget, offline_alpha, cap)
    at_cap = 0
    while cap * (at_cap + 1) * (at_cap + 2) <= c:
        at_cap += 1
    if proposals is None:
        total = cap * at_cap + c / (at_cap + 1)
    else:
        total = sum(min(cap, c / (t * (t + 1))) for t in range(1, proposals + 1))
    return 2.0 * offline_alpha * total


def confirm_decision(
    *,
    enough_groups: bool,
    ndcg_gain: float | None,
    recall_gain: float | None,
    min_ndcg_gain: float,
    harm: float | None,
    max_mean_harm: float,
    severe_share: float | None,
    max_severe_share: float,
    p_value: float | None,
    alpha: float,
) -> HoldoutDecision:
    """The version-3 holdout gate, which confirms: the minimum mean NDCG gain, no mean recall
    loss, the harm and severe-share bounds of version 2, and the groups' one-sided paired
    sign-flip p-value at most ``alpha``, the level this look may spend (``holdout_level`` for
    version 4, ``look_alpha`` for version 3)."""
    if not enough_groups:
        return "insufficient_data"
    assert None not in (ndcg_gain, recall_gain, harm, severe_share, p_value)
    if not (ndcg_gain >= min_ndcg_gain and recall_gain >= -TOLERANCE and p_value <= alpha):  # type: ignore[operator]
        return "no_improvement"
    bounded = harm <= max_mean_harm + TOLERANCE and severe_share <= max_severe_share + TOLERANCE  # type: ignore[operator]
    return "improved_full_retrieval" if bounded else "no_improvement"


def holdout_decision(
    *,
    enough_groups: bool,
    ndcg_gain: float | None,
    interval_low: float | None,
    recall_gain: float | None,
    min_ndcg_gain: float,
    regression_fraction: float | None = None,
    max_regression_fraction: float | None = None,
    harm: float | None = None,
    max_mean_harm: float | None = None,
    severe_share: float | None = None,
    max_severe_share: float | None = None,
    p_value: float | None = None,
    max_p_value: float | None = None,
) -> HoldoutDecision:
    """Improvement needs the minimum mean NDCG gain, a positive bootstrap lower endpoint and no
    mean recall loss, and then a bound on regressions:

    * version-2 reports (``max_mean_harm`` given): the harm — the mean over all groups of the
      NDCG lost by the groups that regressed — at most ``max_mean_harm``, and the share of
      groups that lost at least the severe loss at most ``max_severe_share`` (the worst-case
      guard). Many small regressions under a large net gain pass; a minority hurt badly fails.
    * version-1 reports: at most ``max_regression_fraction`` of the groups regressed at all.

    Version-2 reports also need the paired sign-flip test's one-sided p-value at most
    ``max_p_value`` (the percentile bootstrap alone accepts too often with few changed groups).
    """
    if not enough_groups:
        return "insufficient_data"
    assert None not in (ndcg_gain, interval_low, recall_gain)
    if not (ndcg_gain >= min_ndcg_gain and interval_low > 0.0 and recall_gain >= -TOLERANCE):  # type: ignore[operator]
        return "no_improvement"
    if max_p_value is not None and not (p_value is not None and p_value <= max_p_value):
        return "no_improvement"
    if max_mean_harm is not None:
        assert None not in (harm, severe_share, max_severe_share)
        bounded = harm <= max_mean_harm + TOLERANCE and severe_share <= max_severe_share + TOLERANCE  # type: ignore[operator]
    else:
        assert None not in (regression_fraction, max_regression_fraction)
        bounded = regression_fraction <= max_regression_fraction  # type: ignore[operator]
    return "improved_full_retrieval" if bounded else "no_improvement"


def regression_harm(differences: np.ndarray, severe_loss: float) -> tuple[float, float, float]:
    """(harm, benefit, severe share) of per-group differences: the mean over all groups of the
    loss of the regressed groups, the same of the gain of the improved ones, and the share of
    groups that lost at least ``severe_loss``."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        return 0.0, 0.0, 0.0
    losses = np.where(d < -TOLERANCE, -d, 0.0)
    gains = np.where(d > TOLERANCE, d, 0.0)
    harm = math.fsum(losses.tolist()) / d.size
    benefit = math.fsum(gains.tolist()) / d.size
    severe = float(np.count_nonzero(d <= -severe_loss + TOLERANCE)) / d.size
    return harm, benefit, severe
