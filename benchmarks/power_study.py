"""Planted-effect power study: how much judged feedback the gates need to activate a true gain,
and how often they activate when there is none.

Run: ``python -m benchmarks.power_study`` (about an hour on 2 cores; ``--quick`` for a small
version, ``--update-results`` to write ``benchmarks/results/power/``).

Each *owner-season* draws a fresh synthetic owner (``benchmarks.power_world``) whose true
full-retrieval gain is δ: n judged feedback queries arriving over 10 nights (night t holds the
first ⌈n·t/10⌉, every group on the same side of the fixed hash split every night), and a
holdout of max(50, n/2) queries with complete relevant sets, registered before the first night.
Every night runs the real learning code on the feedback so far: ``learning.observations.prepare``
and ``learning.offline.evaluate_prepared`` (the proposal stage the Dagster asset and the batch
job call: the coverage minimums, the pool-replay fit, the validation statistics), then the
proposal's holdout: both arms ranked by the engine's pool ranker over each holdout query's
complete pool, the per-group metrics summarized by ``learning.full_retrieval.summarize_groups``
(what a holdout report computes its decision from). Each design's gates then decide
(``learning.gates``): *today* (report version 2: bootstrap and sign-flip at 2.5% on both gates)
and *sequential* (report version 3: the offline screen and the confirming holdout with its
error budget spent over the partition's holdout looks). *Ideal* is the reference of one paired
sign-flip test at 2.5% of the planted profile itself on all the labels so far (no fit, no split).

A *single look* at n is the season's last night judged alone (look 1, nothing spent before);
a *season* activates on the first night both gates pass, every nightly look counted.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks import power_world as world
from prme_core.learning.bootstrap import sign_flip_p_value
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import FullRetrievalEvaluationConfig, summarize_groups
from prme_core.learning.observations import prepare
from prme_core.learning.offline import coverage_sufficient, evaluate_prepared
from prme_core.learning.pool_ranking import PoolRequest, PoolSet
from prme_core.learning.snapshot import snapshot_from_receipts
from prme_core.receipts.store import receipt_bytes

DELTAS = (0.0, 0.01, 0.02, 0.03, 0.05)
VOLUMES = (100, 200, 400, 800, 1600)
NIGHTS = 10
NULL_SEEDS = 200
"""Seasons per δ = 0 cell: a false-activation rate near 5% is then known to about ±3 points (95%)."""
SEEDS = 60
"""Seasons per δ > 0 cell."""
HOLDOUT_SHARE, MIN_HOLDOUT = 0.5, 50
SCRATCH = Path(".prme/benchmarks/power")
RESULTS = Path(__file__).parent / "results" / "power"


def holdout_size(n: int) -> int:
    return max(MIN_HOLDOUT, int(n * HOLDOUT_SHARE))


@dataclass
class Look:
    """What one night's learning run measured (the inputs every design's gates decide from)."""

    night: int
    judged: int
    training_groups: int = 0
    validation_groups: int = 0
    coverage: bool = False
    offline: dict = field(default_factory=dict)
    holdout: dict = field(default_factory=dict)
    ideal: dict = field(default_factory=dict)
    validation_differences: list[float] = field(default_factory=list)
    holdout_differences: list[float] = field(default_factory=list)


@dataclass
class Season:
    delta: float
    n: int
    seed: int
    beta: float
    holdout_queries: int
    looks: list[Look]
    seconds: float


def _checksum(receipt) -> str:
    import hashlib

    return hashlib.sha256(receipt_bytes(receipt)).hexdigest()


def run_season(delta: float, n: int, seed: int, beta: float) -> Season:
    started = time.perf_counter()
    tag = f"power:{delta}:{n}:{seed}"
    rng = np.random.default_rng([int(delta * 1e4), n, seed])
    feedback = world.draw_queries(rng, beta, n, f"feedback {seed}")
    holdout = world.Holdout(world.draw_queries(rng, beta, holdout_size(n), f"holdout {seed}"), tag)
    receipts, records, judged_requests = [], [], []
    for i, q in enumerate(feedback):
        receipt, ids = world.receipt_of(q, f"{tag}:feedback:{i}")
        relevant = {ids[j] for j in q.relevant}
        record = world.feedback_record(receipt, relevant, f"{tag}:record:{i}")
        receipts.append((receipt, _checksum(receipt)))
        records.append(record)
        labels = record.labels
        judged_requests.append(
            PoolRequest(
                receipt.pool_columns(),
                tuple(sorted(u.bytes for u, v in labels.items() if v)),
                tuple(sorted(u.bytes for u, v in labels.items() if not v)),
            )
        )
    planted = world.planted_profile(beta)
    config = LearningConfig()
    hold_cfg = FullRetrievalEvaluationConfig().resolved()
    looks = []
    for night in range(1, NIGHTS + 1):
        m = math.ceil(n * night / NIGHTS)
        look = Look(night=night, judged=m)
        snapshot = snapshot_from_receipts(world.OWNER, receipts[:m], records[:m])
        prepared = prepare(snapshot, owner=world.OWNER, scopes=list(world.SCOPES), config=config)
        look.ideal = _ideal(judged_requests[:m], planted)
        look.coverage = coverage_sufficient(prepared)
        report = evaluate_prepared(prepared)
        look.training_groups = report.coverage.training_queries
        look.validation_groups = report.coverage.validation_queries
        if look.coverage:
            diffs = [q.candidate_ndcg - q.baseline_ndcg for q in report.queries if q.split == "validation"]
            look.validation_differences = diffs
            look.offline = {
                "decision_v2": report.decision,
                "gain": report.validation_ndcg_gain,
                "interval": list(report.validation_gain_interval),
                "pairwise_gain": report.validation_pairwise_gain,
                "sign_flip_p": report.sign_flip_p,
                "multipliers": report.multipliers.model_dump(),
            }
            ndcg, recall = holdout.metrics(report.multipliers)
            base_ndcg, base_recall = holdout.base
            zeros = np.zeros_like(ndcg)
            summary = summarize_groups(
                {"ndcg": base_ndcg, "recall": base_recall, "mrr": zeros},
                {"ndcg": ndcg, "recall": recall, "mrr": zeros},
                hold_cfg,
            )
            look.holdout_differences = (ndcg - base_ndcg).tolist()
            true_gain = holdout_true_gain(report.multipliers, beta, seed)
            look.holdout = {
                "decision_v2": summary["decision"],
                "gain": summary["ndcg_gain"],
                "interval": list(summary["ndcg_gain_interval"] or (None, None)),
                "recall_gain": summary["recall_gain"],
                "harm": summary["harm"],
                "severe_share": summary["severe_share"],
                "sign_flip_p": summary["sign_flip_p"],
                "true_gain": true_gain,
            }
        looks.append(look)
    return Season(delta, n, seed, beta, holdout.size, looks, time.perf_counter() - started)


def _ideal(requests: list[PoolRequest], planted) -> dict:
    """One paired sign-flip test (one-sided, 2.5%) of the planted profile on every label so far."""
    usable = [r for r in requests if r.positives and r.negatives]
    pools = PoolSet(usable)
    base, _ = pools.judged_metrics(pools.rank(None), world.K)
    cand, _ = pools.judged_metrics(pools.rank(planted), world.K)
    d = cand - base
    p = sign_flip_p_value(d, samples=2000, seed=42)
    return {
        "gain": float(d.mean()),
        "sign_flip_p": p,
        "groups": len(usable),
        "passed": bool(d.mean() > 0 and p <= 0.025),
    }


_TRUE_GAIN_SAMPLE: dict[float, world.Holdout] = {}


def holdout_true_gain(multipliers, beta: float, seed: int) -> float:
    """The proposal's true gain: its mean NDCG@10 gain on a fixed 3,000-query sample of the world."""
    sample = _TRUE_GAIN_SAMPLE.get(beta)
    if sample is None:
        rng = np.random.default_rng(99)
        sample = _TRUE_GAIN_SAMPLE[beta] = world.Holdout(world.draw_queries(rng, beta, 3000, "truth"), "truth")
    ndcg, _ = sample.metrics(multipliers)
    return float(np.mean(ndcg - sample.base[0]))


# --- running many seasons ---------------------------------------------------------------------


def _season_path(out: Path, delta: float, n: int, seed: int) -> Path:
    return out / "seasons" / f"d{delta:.2f}_n{n}_s{seed}.pkl"


def _work(args: tuple[float, int, int, float, str]) -> str:
    delta, n, seed, beta, out = args
    path = _season_path(Path(out), delta, n, seed)
    if not path.exists():
        season = run_season(delta, n, seed, beta)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(season))
        tmp.replace(path)
    return str(path)


def plan(deltas: Iterable[float], volumes: Iterable[int], null_seeds: int, seeds: int) -> list[tuple[float, int, int]]:
    return [(d, n, s) for d in deltas for n in volumes for s in range(null_seeds if d == 0.0 else seeds)]


def run(cells: list[tuple[float, int, int]], out: Path, workers: int) -> list[Season]:
    (out / "seasons").mkdir(parents=True, exist_ok=True)
    betas = {d: world.calibrate(d) for d in sorted({c[0] for c in cells})}
    print("planted beta per delta:", betas, file=sys.stderr, flush=True)
    jobs = [(d, n, s, betas[d], str(out)) for d, n, s in cells]
    jobs.sort(key=lambda j: -j[1])  # big seasons first, so the tail is short
    paths: list[str] = []
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_work, j) for j in jobs]
        for done, future in enumerate(as_completed(futures), 1):
            paths.append(future.result())
            if done % 20 == 0 or done == len(jobs):
                rate = done / (time.perf_counter() - started)
                print(
                    f"  {done}/{len(jobs)} seasons ({rate * 60:.1f}/min, ~{(len(jobs) - done) / rate / 60:.0f} min left)",
                    file=sys.stderr,
                    flush=True,
                )
    return [pickle.loads(Path(p).read_bytes()) for p in sorted(paths)]


def load(out: Path) -> list[Season]:
    return [pickle.loads(p.read_bytes()) for p in sorted((out / "seasons").glob("*.pkl"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SCRATCH)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--quick", action="store_true", help="20 null and 10 other seasons per cell")
    parser.add_argument("--analyze-only", action="store_true")
    parser.add_argument("--update-results", action="store_true")
    args = parser.parse_args(argv)
    null_seeds, seeds = (20, 10) if args.quick else (NULL_SEEDS, SEEDS)
    if not args.analyze_only:
        run(plan(DELTAS, VOLUMES, null_seeds, seeds), args.out, args.workers)
    seasons = load(args.out)
    print(f"{len(seasons)} seasons loaded", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
