"""Per cell of ``learner_season`` runs: activation (one look, season) under each design, with
exact (Clopper–Pearson) 95% intervals, and the proposals' true gains."""

from __future__ import annotations

import pickle
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks import power_study as ps
from benchmarks.learner_probe_summary import exact


def main(dirs: list[str]) -> None:
    print(
        "| run | δ | n | seasons | design | one look | season | last-night offline pass | last-night true gain | P(true>0) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in dirs:
        cells = defaultdict(list)
        for p in sorted(Path(d, "seasons").glob("*.pkl")):
            s = pickle.loads(p.read_bytes())
            cells[(s.delta, s.n)].append(s)
        for (delta, n), seasons in sorted(cells.items()):
            m = len(seasons)
            last = [s.looks[-1] for s in seasons]
            gains = np.array([lk.holdout["true_gain"] for lk in last if lk.coverage])
            off = sum(lk.coverage and ps.offline_passes(lk, ps.NEW) for lk in last)
            for design in (ps.TODAY, ps.NEW, ps.IDEAL):
                k1 = sum(ps.season_outcome(s, design, nights=[ps.NIGHTS]).night is not None for s in seasons)
                k2 = sum(ps.season_outcome(s, design).night is not None for s in seasons)
                a, b = exact(k1, m)
                c, e = exact(k2, m)
                print(
                    f"| {Path(d).name} | {delta} | {n} | {m} | {design} | {k1}/{m} [{a:.2f}, {b:.2f}] | {k2}/{m} [{c:.2f}, {e:.2f}] | "
                    f"{off}/{m} | {gains.mean():+.4f} | {np.mean(gains > 0):.2f} |"
                )


if __name__ == "__main__":
    main(sys.argv[1:])
