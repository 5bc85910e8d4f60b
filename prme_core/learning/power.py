"""How much more evidence a gain would need: a normal-approximation power estimate from the
observed per-group differences of a report (pure; no I/O).

For paired per-group NDCG differences with mean gain ``g > 0`` and sample standard deviation
``s``, a one-sided test at level ``α`` rejects "no gain" with 80% power at about
``n80 = ⌈(z₁₋α + 0.84)² · s² / g²⌉`` groups (α = 0.025, the default, is the two-sided 95%
interval's lower end: ``(1.96 + 0.84)²``). A gain ≤ 0 has no such number: more evidence of the
same kind only makes "no gain" surer. The estimate assumes the observed spread and gain hold as
groups are added; it is a planning figure, not a promise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Z_INTERVAL = 1.96
"""Two-sided 95% (the gates' bootstrap interval)."""
Z_POWER = 0.84
"""80% power."""


@dataclass(frozen=True)
class GroupsNeeded:
    """The observed spread of per-group gains and the groups a gain of that size would need."""

    observed_groups: int
    gain: float
    sd: float
    groups_for_power: int | None
    """Groups for 80% power at the observed gain and spread; None when the gain is ≤ 0 (or
    fewer than two groups give no spread)."""

    @property
    def more_groups(self) -> int | None:
        """Groups to add to the observed ones (0 when there are already enough)."""
        return None if self.groups_for_power is None else max(0, self.groups_for_power - self.observed_groups)


def groups_for_power(differences: Sequence[float] | np.ndarray, *, alpha: float | None = None) -> GroupsNeeded:
    """``n80 ≈ (z₁₋α + 0.84)² · SD² / gain²`` from paired per-group differences (``alpha``
    one-sided; None: the 95% interval's 1.96, as version-2 reports record)."""
    d = np.asarray(differences, dtype=np.float64)
    n = int(d.size)
    gain = float(d.mean()) if n else 0.0
    sd = float(d.std(ddof=1)) if n >= 2 else 0.0
    if n < 2 or not gain > 0.0:
        return GroupsNeeded(n, gain, sd, None)
    z = Z_INTERVAL if alpha is None else NormalDist().inv_cdf(1.0 - alpha)
    needed = math.ceil((z + Z_POWER) ** 2 * sd * sd / (gain * gain))
    return GroupsNeeded(n, gain, sd, max(2, needed))
