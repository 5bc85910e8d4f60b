"""Paired query bootstrap: a seeded percentile interval for the mean of per-group differences.

Algorithm ``numpy-pcg64-percentile-v1``: ``numpy.random.Generator(PCG64(seed))`` draws a
(samples × groups) matrix of indices with replacement; each row's mean is one bootstrap mean;
after sorting, the interval is (means[⌊0.025·B⌋], means[min(B − 1, ⌊0.975·B⌋)]).
Same differences, seed and B give the same interval on every machine.
"""

from __future__ import annotations

import numpy as np

BOOTSTRAP_ALGORITHM = "numpy-pcg64-percentile-v1"
LOWER_QUANTILE, UPPER_QUANTILE = 0.025, 0.975
CONFIDENCE = UPPER_QUANTILE - LOWER_QUANTILE
"""The interval's coverage (95%), as reports and gate messages state it."""


def bootstrap_interval(differences: np.ndarray, *, samples: int, seed: int) -> tuple[float, float]:
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        raise ValueError("a bootstrap interval needs at least one group difference")
    rng = np.random.Generator(np.random.PCG64(seed))
    idx = rng.integers(0, d.size, size=(samples, d.size))
    means = np.sort(d[idx].mean(axis=1))
    return float(means[int(LOWER_QUANTILE * samples)]), float(means[min(samples - 1, int(UPPER_QUANTILE * samples))])
