"""Summarize ``learner_probe`` rows per (variant, opts, δ, n)."""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import numpy as np
from scipy.stats import beta as beta_dist


def exact(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else beta_dist.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else beta_dist.ppf(0.975, k + 1, n - k)
    return float(lo), float(hi)


def probe_cells(paths: list[str]) -> dict[tuple, list[dict]]:
    """``learner_probe`` rows by (variant, opts, δ, n)."""
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            cells[(r["variant"], json.dumps(r["opts"], sort_keys=True), r["delta"], r["n"])].append(r)
    return cells


def main(paths: list[str]) -> None:
    cells = probe_cells(paths)
    print(
        "| variant | opts | δ | n | owners | true gain mean [median] | P(true>0) | fold true gain | offline pass | activated | planted offline pass | all-groups fit true gain |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (v, o, d, n), rows in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][3], kv[0][0], kv[0][1])):
        t = np.array([r["true_gain"] for r in rows])
        f = np.array([np.mean(r["fold_true_gains"]) for r in rows])
        k_off, k_act = sum(r["passed"] for r in rows), sum(r["activated"] for r in rows)
        m = len(rows)
        planted = [r["planted_offline_pass"] for r in rows if "planted_offline_pass" in r]
        allfit = [r["allfit_true_gain"] for r in rows if "allfit_true_gain" in r]
        lo, hi = exact(k_act, m)
        print(
            f"| {v} | {o} | {d} | {n} | {m} | {t.mean():+.4f} [{np.median(t):+.4f}] | {np.mean(t > 0):.2f} | {f.mean():+.4f} | "
            f"{k_off}/{m} | {k_act}/{m} [{lo:.2f}, {hi:.2f}] | "
            + (f"{sum(planted)}/{len(planted)}" if planted else "—")
            + " | "
            + (f"{np.mean(allfit):+.4f}" if allfit else "—")
            + " |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
