"""Power-study seasons with a learner variant (issue 26 exploration): the study's own
``run_season`` and design decisions, with ``offline.search`` replaced by a ``learner_probe``
variant, in this process on one thread."""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

from benchmarks import learner_probe as lp
from benchmarks import power_study as ps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", default="base")
    parser.add_argument("--opts", default="{}")
    parser.add_argument("--cells", required=True, help="delta:n:seeds,...  e.g. 0.03:200:20,0.0:200:30")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    cells = []
    for spec in args.cells.split(","):
        d, n, k = spec.split(":")
        cells += [(float(d), int(n), s) for s in range(int(k))]
    cells.sort(key=lambda c: (c[2], c[0], c[1]))  # seed by seed: a stopped run leaves every cell filled alike
    (args.out / "seasons").mkdir(parents=True, exist_ok=True)
    with lp.learner(args.variant, json.loads(args.opts)):
        for d, n, s in cells:
            path = ps._season_path(args.out, d, n, s)
            if path.exists():
                continue
            season = ps.run_season(d, n, s, lp.BETAS[d], ps.PLAIN_CONFIG)
            path.write_bytes(pickle.dumps(season))
            print(f"{args.variant} {args.opts} d={d} n={n} s={s} {season.seconds:.1f}s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
