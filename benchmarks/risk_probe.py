"""Risk-averse shrinkage probe: does choosing the shrinkage factor by held-out NDCG less α × its
held-out harm (``LearningConfig.shrinkage_risk_aversion``) cost the planted world's gains any
power, and does it churn less?

Run: ``python -m benchmarks.risk_probe [--cells 0.03:400:16,0.03:800:12,0.0:400:16] [--aversion 1]
[--workers 2] [--out DIR | --update-results]``.

Each owner of a cell is the power study's draw for (δ, n, seed) (``benchmarks.power_world``),
judged in one look at all n queries — exactly the study's last night of that season — and fitted
twice on the same feedback: by the study's risk-neutral learner (the shrinkage choice that shipped
before the risk-averse default, ``shrinkage_risk_aversion`` = 0) and by the same learner with
``shrinkage_risk_aversion`` α. Both arms go through the gates that ship (the version-3 offline
gate as the study's *new* design re-derives it, then the holdout's first look). Paired: one draw, two fits; the table counts activations per arm and the owners
only one arm activated.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import power_world as world
from benchmarks.common import add_output_options
from benchmarks.power_study import (
    LEARNERS,
    NEW,
    _pct,
    holdout_summary,
    offline_passes,
    parse_cells,
    run_season,
    wilson,
)
from prme_core.errors import InvalidInput
from prme_core.learning.config import MAX_RISK_AVERSION, LearningConfig

DEFAULT_CELLS = "0.03:400:16,0.03:800:12,0.0:400:16"
SCRATCH_OUT = Path(".prme/benchmarks/risk-probe")
COMMITTED_OUT = Path(__file__).parent / "results" / "risk-probe"
ARMS = ("neutral", "averse")


def arm_configs(aversion: float) -> dict[str, LearningConfig]:
    """The study's risk-neutral learner (the default before the risk-averse one) and the same
    learner with ``aversion``."""
    neutral = LEARNERS["neutral"]
    return {"neutral": neutral, "averse": neutral.model_copy(update={"shrinkage_risk_aversion": aversion})}


def judge(args: tuple[float, int, int, float, str, dict]) -> dict[str, Any]:
    """One owner, one arm: the single look and what the shipped gates decide on it."""
    delta, n, seed, beta, arm, config = args
    started = time.process_time()
    season = run_season(delta, n, seed, beta, LearningConfig.model_validate(config), nights=1)
    (look,) = season.looks
    row: dict[str, Any] = {"delta": delta, "n": n, "seed": seed, "arm": arm, "coverage": look.coverage}
    if look.coverage:
        summary = holdout_summary(season, look, NEW, 1)
        offline = offline_passes(look, NEW)
        row.update(
            offline=offline,
            holdout=summary["decision"],
            activated=offline and summary["decision"] == "improved_full_retrieval",
            holdout_gain=float(np.mean(look.holdout_differences)),
            harm=summary["harm"],
            regressed=float(np.mean(np.asarray(look.holdout_differences) < 0)),
            true_gain=look.holdout["true_gain"],
            evidence_p=look.offline["evidence_sign_flip_p"],
        )
    row["cpu_seconds"] = time.process_time() - started
    return row


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per cell and arm: activations (Wilson 95%), each gate's passes, mean holdout gain, harm and
    regressed share; per cell the owners only one arm activated."""
    out = []
    for delta, n in sorted({(r["delta"], r["n"]) for r in rows}):
        cell = [r for r in rows if (r["delta"], r["n"]) == (delta, n)]
        by_seed: dict[int, dict[str, dict]] = {}
        for r in cell:
            by_seed.setdefault(r["seed"], {})[r["arm"]] = r
        paired = [v for v in by_seed.values() if set(v) == set(ARMS)]
        entry: dict[str, Any] = {"delta": delta, "n": n, "owners": len(paired)}
        for arm in ARMS:
            looks = [v[arm] for v in paired]
            covered = [r for r in looks if r["coverage"]]
            wins = sum(bool(r.get("activated")) for r in looks)
            entry[arm] = {
                "activated": wins,
                "rate": wins / len(looks) if looks else None,
                "wilson": list(wilson(wins, len(looks))) if looks else None,
                "offline_passed": sum(bool(r.get("offline")) for r in covered),
                "holdout_passed": sum(r.get("holdout") == "improved_full_retrieval" for r in covered),
                "mean_holdout_gain": _mean([r["holdout_gain"] for r in covered]),
                "mean_harm": _mean([r["harm"] for r in covered]),
                "mean_regressed": _mean([r["regressed"] for r in covered]),
                "mean_true_gain": _mean([r["true_gain"] for r in covered]),
            }
        entry["only_neutral"] = sum(
            bool(v["neutral"].get("activated")) and not v["averse"].get("activated") for v in paired
        )
        entry["only_averse"] = sum(
            bool(v["averse"].get("activated")) and not v["neutral"].get("activated") for v in paired
        )
        out.append(entry)
    return out


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def markdown(report: dict[str, Any]) -> str:
    meta = report["meta"]
    lines = [
        "# Risk-averse shrinkage probe",
        "",
        f"Generated by `python -m benchmarks.risk_probe {meta['arguments']}` ({meta['cpu_seconds'] / 60:.1f} "
        f"CPU-minutes). Each owner is the power study's draw for (δ, n, seed), judged in one look at all n "
        "judged queries (the study's last night), fitted by the study's learner (*neutral*: the shrinkage "
        f"factor with the best held-out NDCG) and by the same learner choosing by held-out NDCG − "
        f"{meta['aversion']:g} × held-out harm (*averse*), both through the gates that ship (the version-3 "
        "offline gate, then the holdout's first look). Holdout figures are means over the owners whose "
        "look reached the offline gate.",
        "",
        "| δ | n | owners | arm | activated | 95% (Wilson) | offline passed | holdout passed | holdout gain "
        "| harm | regressed | true gain |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cells"]:
        for arm in ARMS:
            a = c[arm]
            lo, hi = a["wilson"] or (None, None)
            lines.append(
                f"| {c['delta']:+.2f} | {c['n']} | {c['owners']} | {arm} | {a['activated']} of {c['owners']} "
                f"| {_pct(lo)}–{_pct(hi)} | {a['offline_passed']} | {a['holdout_passed']} "
                f"| {_num(a['mean_holdout_gain'], '+.4f')} | {_num(a['mean_harm'], '.4f')} "
                f"| {_pct(a['mean_regressed'])} | {_num(a['mean_true_gain'], '+.4f')} |"
            )
    lines += ["", "Owners only one arm activated (paired: the same draw):", ""]
    lines += [
        f"- δ {c['delta']:+.2f}, n {c['n']}: neutral only {c['only_neutral']}, averse only {c['only_averse']}"
        for c in report["cells"]
    ]
    return "\n".join(lines) + "\n"


def _num(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.risk_probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", default=DEFAULT_CELLS, help=f"delta:n:seeds,… (default {DEFAULT_CELLS})")
    parser.add_argument(
        "--aversion",
        type=float,
        default=1.0,
        help=f"the averse arm's shrinkage_risk_aversion (0 to {MAX_RISK_AVERSION:g}; default 1)",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    add_output_options(parser, scratch=SCRATCH_OUT, committed="benchmarks/results/risk-probe")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0.0 < args.aversion <= MAX_RISK_AVERSION:
        raise InvalidInput("--aversion", f"must be in (0, {MAX_RISK_AVERSION:g}], got {args.aversion}")
    if args.workers < 1:
        raise InvalidInput("--workers", f"must be ≥ 1, got {args.workers}")
    cells = parse_cells(args.cells)
    configs = {arm: c.model_dump(mode="json") for arm, c in arm_configs(args.aversion).items()}
    betas = {d: world.calibrate(d) for d in sorted({c[0] for c in cells})}
    jobs = [(d, n, s, betas[d], arm, configs[arm]) for d, n, s in cells for arm in ARMS]
    jobs.sort(key=lambda j: (j[2], -j[1]))  # seed by seed: a stopped run leaves every cell alike
    rows = []
    with contextlib.ExitStack() as stack:
        if args.workers == 1:  # in this process: no child forked from a process that may hold threads
            looks = map(judge, jobs)
        else:  # forkserver: the children start clean, whatever threads this process runs
            pool = ProcessPoolExecutor(max_workers=args.workers, mp_context=multiprocessing.get_context("forkserver"))
            looks = stack.enter_context(pool).map(judge, jobs)
        for done, row in enumerate(looks, 1):
            rows.append(row)
            print(f"  {done}/{len(jobs)} looks", file=sys.stderr, flush=True)
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--update-results"]
    report = {
        "meta": {
            "arguments": " ".join(shown),
            "aversion": args.aversion,
            "cpu_seconds": sum(r["cpu_seconds"] for r in rows),
            "configs": configs,
        },
        "cells": summarize(rows),
        "looks": rows,
    }
    out = COMMITTED_OUT if args.update_results else Path(args.out or SCRATCH_OUT)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "results.md").write_text(markdown(report))
    print(f"wrote {out / 'results.json'} and {out / 'results.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
