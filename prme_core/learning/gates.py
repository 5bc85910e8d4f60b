"""The gate decisions, as pure functions. Report models call them to re-derive their own
decision on load; Dagster asset checks call them to enforce the gates."""

from __future__ import annotations

from typing import Literal

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
) -> OfflineDecision:
    """Improvement needs the minimum mean validation NDCG gain, a positive bootstrap lower
    endpoint and no mean pairwise-accuracy regression."""
    if not enough_groups:
        return "insufficient_data"
    assert ndcg_gain is not None and interval_low is not None and pairwise_gain is not None
    if ndcg_gain >= min_ndcg_gain and interval_low > 0.0 and pairwise_gain >= -TOLERANCE:
        return "improved_on_observed_candidates"
    return "no_improvement"


def holdout_decision(
    *,
    enough_groups: bool,
    ndcg_gain: float | None,
    interval_low: float | None,
    recall_gain: float | None,
    regression_fraction: float | None,
    min_ndcg_gain: float,
    max_regression_fraction: float,
) -> HoldoutDecision:
    """Improvement needs the minimum mean NDCG gain, a positive bootstrap lower endpoint, no
    mean recall loss and at most the allowed fraction of regressed groups."""
    if not enough_groups:
        return "insufficient_data"
    assert None not in (ndcg_gain, interval_low, recall_gain, regression_fraction)
    if (
        ndcg_gain >= min_ndcg_gain
        and interval_low > 0.0
        and recall_gain >= -TOLERANCE  # type: ignore[operator]
        and regression_fraction <= max_regression_fraction
    ):  # type: ignore[operator]
        return "improved_full_retrieval"
    return "no_improvement"
