"""Planted-effect power study: how much judged feedback the gates need to activate a true gain,
and how often they activate when there is none.

Run: ``python -m benchmarks.power_study`` (about three hours on 2 cores; ``--quick`` for a small
version, ``--update-results`` to write ``benchmarks/results/power/``).

Each *owner-season* draws a fresh synthetic owner (``benchmarks.power_world``) whose true
full-retrieval gain is δ: n judged feedback queries arriving over 10 nights (night t holds the
first ⌈n·t/10⌉, every group on the same side of the fixed hash split every night), and a
holdout of 300 queries with complete relevant sets, registered before the first night.
Every night runs the real learning code on the feedback so far: ``learning.observations.prepare``
and ``learning.offline.evaluate_prepared`` (the proposal stage the Dagster asset and the batch
job call: the coverage minimums, the pool-replay fit, the validation statistics), then the
proposal's holdout: both arms ranked by the engine's pool ranker over each holdout query's
complete pool, the per-group metrics summarized by ``learning.full_retrieval.summarize_groups``
(what a holdout report computes its decision from). Each design's gates then decide
(``learning.gates``): *today* (report version 2: bootstrap and sign-flip at 2.5% on both gates)
and *new* (report version 3: the offline gate over the validation groups and the cross-fitted
training groups, then the confirming holdout with its error budget spent over the partition's
proposals; the shrunk learner, its factor chosen risk-averse, at today's 15% validation share,
the proposal checked by its validation interval). *share30* is the previous study's *new* (the
same gates and learner at a 30% share, the proposal checked by its validation mean), read from
its committed results (``--previous``). *Ideal* is the reference of one paired sign-flip test at
2.5% of the planted profile itself on all the labels so far (no fit, no split).

A *single look* at n is the season's last night judged alone (look 1, nothing spent before);
a *season* activates on the first night both gates pass, every nightly look counted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import re
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
from prme_core.learning.proposal import offline_gate
from prme_core.learning.snapshot import snapshot_from_receipts
from prme_core.receipts.store import receipt_bytes

DELTAS = (0.0, 0.01, 0.02, 0.03, 0.05)
VOLUMES = (100, 200, 400, 800, 1600)
NIGHTS = 10


LEARNERS = {
    "plain": LearningConfig(search_starts=8, shrinkage_grid=(1.0,), shrinkage_folds=3),
    "shrunk": LearningConfig(search_starts=8),
    "averse": LearningConfig(search_starts=8, shrinkage_risk_aversion=1.0),
    "neutral": LearningConfig(search_starts=8, shrinkage_risk_aversion=0.0),
}
"""The learning configurations a season can run: the defaults but for 8 random starts of the pool
search instead of 32, so that the study's thousands of fits (each with its three cross-fitting
folds) fit in a few hours on 2 cores (a weaker search can only make the proposals, not the gates,
worse). ``plain`` is the learner before shrinkage (the search's point, a one-value grid);
``shrunk`` is today's default (the point shrunk toward the identity by inner folds, at today's
15% validation share, the factor chosen risk-averse: held-out NDCG less 1 × its held-out harm,
``config.RISK_DEFAULTS``); ``averse`` names the same configuration explicitly (the committed
``averse`` study was run under that name before it became the default); ``neutral`` is the shrunk
learner choosing its factor by held-out NDCG alone (``shrinkage_risk_aversion`` = 0: the default
before, whose study is the committed ``results``)."""
STUDY_CONFIG = LEARNERS["shrunk"]
PLAIN_CONFIG = LEARNERS["plain"]


def seeds_for(delta: float, n: int) -> int:
    """Owner-seasons per cell: at δ = 0, 60 (with none activating, the 95% upper bound on the
    rate is 5%); at δ = +0.03, the gain the designs are compared at, 30; at the other gains 12.
    A season of 1,600 judged queries fits ten proposals, each with its three cross-fitting folds
    (about two minutes on one core), so n = 1,600 has 40, 24 and 10."""
    if n >= 1600:
        return 40 if delta == 0.0 else 24 if delta == 0.03 else 10
    if delta == 0.0:
        return 60
    return 30 if delta == 0.03 else 12


HOLDOUT_QUERIES = 300
"""Holdout queries an operator registered before the first night (LoCoMo's tenant-sized owner: 307)."""
SCRATCH = Path(".prme/benchmarks/power")
RESULTS = Path(__file__).parent / "results" / "power"


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
    base_ndcg: np.ndarray | None = None
    base_recall: np.ndarray | None = None


def _checksum(receipt) -> str:
    import hashlib

    return hashlib.sha256(receipt_bytes(receipt)).hexdigest()


def run_season(
    delta: float, n: int, seed: int, beta: float, config: LearningConfig | None = None, nights: int = NIGHTS
) -> Season:
    """One owner-season: n judged queries over ``nights`` nights (1: a single look at all n, the
    same draws as a season's last night), the proposal stage and its holdout every night."""
    started = time.perf_counter()
    tag = f"power:{delta}:{n}:{seed}"
    rng = np.random.default_rng([int(delta * 1e4), n, seed])
    feedback = world.draw_queries(rng, beta, n, f"feedback {seed}")
    holdout = world.Holdout(world.draw_queries(rng, beta, HOLDOUT_QUERIES, f"holdout {seed}"), tag)
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
    config = config or STUDY_CONFIG
    looks = []
    for night in range(1, nights + 1):
        m = math.ceil(n * night / nights)
        look = Look(night=night, judged=m)
        snapshot = snapshot_from_receipts(world.OWNER, receipts[:m], records[:m])
        prepared = prepare(snapshot, owner=world.OWNER, scopes=list(world.SCOPES), config=config)
        look.ideal = _ideal(judged_requests[:m], planted)
        look.coverage = coverage_sufficient(prepared)
        report = evaluate_prepared(prepared)
        look.training_groups = report.coverage.training_queries
        look.validation_groups = report.coverage.validation_queries
        if look.coverage:
            look.validation_differences = [
                q.candidate_ndcg - q.baseline_ndcg for q in report.queries if q.split == "validation"
            ]
            look.offline = {
                "decision": report.decision,
                "gain": report.validation_ndcg_gain,
                "interval": list(report.validation_gain_interval),
                "pairwise_gain": report.validation_pairwise_gain,
                "sign_flip_p": report.sign_flip_p,
                "evidence_groups": report.evidence_groups,
                "evidence_gain": report.evidence_ndcg_gain,
                "evidence_pairwise_gain": report.evidence_pairwise_gain,
                "evidence_sign_flip_p": report.evidence_sign_flip_p,
                "multipliers": report.multipliers.model_dump(),
                "config": report.config.model_dump(mode="json"),
            }
            ndcg, recall = holdout.metrics(report.multipliers)
            look.holdout_differences = (ndcg - holdout.base[0]).tolist()
            look.holdout = {
                "ndcg": ndcg,
                "recall": recall,
                "true_gain": holdout_true_gain(report.multipliers, beta, seed),
            }
        looks.append(look)
    return Season(
        delta,
        n,
        seed,
        beta,
        holdout.size,
        looks,
        time.perf_counter() - started,
        base_ndcg=holdout.base[0],
        base_recall=holdout.base[1],
    )


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


def _season_path(out: Path, delta: float, n: int, seed: int, learner: str = "shrunk") -> Path:
    folder = "seasons" if learner == "plain" else f"seasons-{learner}"  # plain: where earlier runs kept theirs
    return out / folder / f"d{delta:.2f}_n{n}_s{seed}.pkl"


def _work(args: tuple[float, int, int, float, str, str]) -> str:
    delta, n, seed, beta, out, learner = args
    path = _season_path(Path(out), delta, n, seed, learner)
    if not path.exists():
        season = run_season(delta, n, seed, beta, LEARNERS[learner])
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(season))
        tmp.replace(path)
    return str(path)


def medium_seeds(delta: float, n: int) -> int:
    """The medium plan (about two hours on 2 cores): 36 seasons per cell at δ = 0 (24 at
    n = 1,600), 20 at δ = +0.03 (12), 6 at the other gains (4)."""
    big = n >= 1600
    if delta == 0.0:
        return 24 if big else 36
    if delta == 0.03:
        return 12 if big else 20
    return 4 if big else 6


def plan(
    deltas: Iterable[float], volumes: Iterable[int], quick: bool = False, medium: bool = False
) -> list[tuple[float, int, int]]:
    def count(d: float, n: int) -> int:
        if quick:
            return 8 if d == 0.0 else 4
        return medium_seeds(d, n) if medium else seeds_for(d, n)

    return [(d, n, s) for d in deltas for n in volumes for s in range(count(d, n))]


def run(cells: list[tuple[float, int, int]], out: Path, workers: int, learner: str = "shrunk") -> list[Season]:
    _season_path(out, 0.0, 0, 0, learner).parent.mkdir(parents=True, exist_ok=True)
    betas = {d: world.calibrate(d) for d in sorted({c[0] for c in cells})}
    print("planted beta per delta:", betas, file=sys.stderr, flush=True)
    jobs = [(d, n, s, betas[d], str(out), learner) for d, n, s in cells]
    # seed by seed (big seasons first within a seed): a run stopped early leaves every cell with
    # about the same share of its seasons, and a later run resumes from the saved ones
    jobs.sort(key=lambda j: (j[2], -j[1]))
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


def load(out: Path, cells: list[tuple[float, int, int]], learner: str = "shrunk") -> list[Season]:
    """The planned seasons found in ``out`` (a bigger earlier plan's extra seasons stay unread)."""
    paths = [_season_path(out, d, n, s, learner) for d, n, s in cells]
    return [pickle.loads(p.read_bytes()) for p in paths if p.exists()]


# --- the designs' decisions ----------------------------------------------------------------------

TODAY, V3, GATES, SHARE30, NEUTRAL, NEW, IDEAL = "today", "v3", "gates", "share30", "neutral", "new", "ideal"
DESIGNS = (TODAY, V3, GATES, SHARE30, NEUTRAL, NEW, IDEAL)
SEASON_DESIGNS = (TODAY, V3, GATES, NEW, IDEAL)
"""The designs a season's looks are judged by here; SHARE30's and NEUTRAL's rows come from earlier
results files."""
DESIGN_LABELS = {
    TODAY: "today (the plain learner; v2: bootstrap + sign-flip at 2.5% on the validation groups, then on the "
    "holdout; every night alone)",
    V3: "v3 (the plain learner; sign-flip at 2.5% over the validation and cross-fitted training groups, then "
    "the holdout within a 5% budget spent over its looks alone: 2.5%, 0.83%, 0.42%, …)",
    GATES: "gates (the plain learner; v4: the same offline gate, then the holdout within a 5% budget spent over "
    "the partition's proposals, counting the offline gate each passed first: 2.5% for the first twenty nights' "
    "proposals) — the previous study's *new*",
    SHARE30: "share30 (the shrunk learner with the v4 gates and a 30% validation share) — the previous study's "
    "*new*, its rows read from that study's results (`--previous`)",
    NEUTRAL: "neutral (the shrunk learner choosing its factor by held-out NDCG alone, with the v4 gates and a "
    "15% validation share) — the study before risk-averse shrinkage, its rows read from that study's results "
    "(`--neutral`)",
    NEW: "new (the shrunk learner choosing its factor risk-averse: the inner folds' held-out NDCG less 1 × their "
    "held-out harm, `shrinkage_risk_aversion` = 1 — with the v4 gates and a 15% validation share)",
    IDEAL: "ideal (one paired sign-flip test at 2.5% of the planted profile on all labels)",
}
NEW_LABELS = {
    "shrunk": DESIGN_LABELS[NEW],
    "averse": DESIGN_LABELS[NEW],
    "neutral": "new (the risk-neutral shrunk learner — the proposal and each fold's pulled toward the identity by "
    "the factor with the best held-out NDCG on inner folds of their own training groups — with the v4 gates and a "
    "15% validation share, so the proposal fits on 85% of the judged groups)",
}
"""NEW's label by whose seasons the new rows are (``meta.new_learner``, ``--learner``): today's
default and its explicit name are risk-averse; ``neutral`` is the learner before that default."""
GATED = (TODAY, V3, GATES, SHARE30, NEUTRAL, NEW)
PLAIN_DESIGNS = (TODAY, V3, GATES)
"""Designs judged on the plain learner's seasons; NEW and IDEAL on the shrunk learner's."""
BASELINE_NAMES = {TODAY: "today", V3: "v3", GATES: "new"}
"""Where a plain design's rows come from in a results file written before shrinkage."""


def offline_passes(look: Look, design: str) -> bool:
    """The proposal stage's gate: version 3 over the validation and cross-fitted groups — for NEW
    re-derived by ``proposal.offline_gate`` from the look's evidence with today's proposal check
    (``LearningConfig.proposal_check``, resolved where the look was recorded before it: the gate
    reads nothing the fit depends on, so the decision is the one a run of today's code makes),
    for V3 and GATES the report's own decision — or version 2 (the same report's validation
    groups alone, by the version-2 rule: the bootstrap bound and the sign-flip test at 2.5%)."""
    o = look.offline
    if design == NEW:
        decision = offline_gate(
            schema_version=3,
            config=LearningConfig.model_validate(o["config"]).resolved(),
            ndcg_gain=o["evidence_gain"],
            interval_low=o["interval"][0],  # read by version 2 only
            pairwise_gain=o["evidence_pairwise_gain"],
            p_value=o["evidence_sign_flip_p"],
            proposal_gain=o["gain"],
            proposal_interval=(o["interval"][0], o["interval"][1]),
        )
        return decision == "improved_on_observed_candidates"
    if design != TODAY:  # a plain season's look is judged by GATES by the report's own decision
        return o["decision"] == "improved_on_observed_candidates"
    config = LearningConfig.model_validate(o["config"]).model_copy(update={"crossfit_folds": None})
    decision = offline_gate(
        schema_version=2,
        config=config,
        ndcg_gain=o["gain"],
        interval_low=o["interval"][0],
        pairwise_gain=o["pairwise_gain"],
        p_value=o["sign_flip_p"],
    )
    return decision == "improved_on_observed_candidates"


def holdout_summary(season: Season, look: Look, design: str, holdout_look: int) -> dict:
    """The holdout report's summary and decision (``summarize_groups``) under the design's gate:
    version 4 numbers the night's proposal among the season's (every night records one, passed
    or not) and looks once at each."""
    if design == TODAY:
        config = FullRetrievalEvaluationConfig().resolved_v2()
    elif design == V3:
        config = FullRetrievalEvaluationConfig().resolved(look=holdout_look)
    else:
        offline_alpha = look.offline["config"]["max_p_value"]
        config = FullRetrievalEvaluationConfig().resolved(look=1, offline_look=look.night, offline_alpha=offline_alpha)
    zeros = np.zeros(season.holdout_queries)
    return summarize_groups(
        {"ndcg": season.base_ndcg, "recall": season.base_recall, "mrr": zeros},
        {"ndcg": look.holdout["ndcg"], "recall": look.holdout["recall"], "mrr": zeros},
        config,
    )


@dataclass
class Outcome:
    night: int | None  # the first night both gates passed (None: the season never activated)
    true_gain: float | None  # the activated proposal's true gain
    holdout_looks: int  # holdout evaluations the season ran


def season_outcome(season: Season, design: str, *, nights: Iterable[int] | None = None) -> Outcome:
    """Activation over the season's nights (or only ``nights``), every look counted: version 3
    numbers its holdout looks, each spending its share of the budget; version 4 spends by night."""
    wanted = set(nights) if nights is not None else None
    looks = 0
    for look in season.looks:
        if wanted is not None and look.night not in wanted:
            continue
        if design == IDEAL:
            if look.ideal["passed"]:
                return Outcome(look.night, None, 0)
            continue
        if not look.coverage or not offline_passes(look, design):
            continue
        looks += 1
        if holdout_summary(season, look, design, looks)["decision"] == "improved_full_retrieval":
            return Outcome(look.night, look.holdout["true_gain"], looks)
    return Outcome(None, None, looks)


def last_night_stop(season: Season) -> str:
    """What decided the new design's single look (the last night): the first gate or bound that
    refused, or ``activated``."""
    look = season.looks[-1]
    if not look.coverage:
        return "coverage"
    if not offline_passes(look, NEW):
        return "offline gate"
    summary = holdout_summary(season, look, NEW, 1)
    if summary["decision"] == "improved_full_retrieval":
        return "activated"
    cfg = FullRetrievalEvaluationConfig().resolved(look=1)
    if summary["ndcg_gain"] < cfg.min_ndcg_gain or summary["recall_gain"] < 0:
        return "holdout gain"
    if summary["sign_flip_p"] > cfg.max_p_value:
        return "holdout p-value"
    if summary["harm"] > cfg.max_mean_harm:  # type: ignore[operator]
        return "holdout harm bound"
    return "holdout severe share"


STOPS = (
    "activated",
    "coverage",
    "offline gate",
    "holdout gain",
    "holdout p-value",
    "holdout harm bound",
    "holdout severe share",
)


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    if trials == 0:
        return (float("nan"), float("nan"))
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def cell_rates(seasons: list[Season], designs: Iterable[str] = SEASON_DESIGNS) -> dict:
    """Per design: activation on one look (the last night judged alone) and over the season."""
    out: dict = {"seasons": len(seasons)}
    for design in designs:
        single = [season_outcome(s, design, nights=[NIGHTS]) for s in seasons]
        season = [season_outcome(s, design) for s in seasons]
        hits_single = sum(o.night is not None for o in single)
        hits_season = sum(o.night is not None for o in season)
        activated_gains = [o.true_gain for o in season if o.true_gain is not None]
        out[design] = {
            "single": hits_single / len(seasons),
            "single_ci": wilson(hits_single, len(seasons)),
            "season": hits_season / len(seasons),
            "season_ci": wilson(hits_season, len(seasons)),
            "mean_first_night": (
                float(np.mean([o.night for o in season if o.night is not None])) if hits_season else None
            ),
            "activated_true_gain": float(np.mean(activated_gains)) if activated_gains else None,
            "activated_below_baseline": sum(g < 0 for g in activated_gains),
            "holdout_looks": float(np.mean([o.holdout_looks for o in season])),
        }
    if NEW in designs:
        stops = [last_night_stop(s) for s in seasons]
        out["new_single_stops"] = {name: stops.count(name) for name in STOPS}
    return out


def volume_for(rates: dict[int, float], target: float = 0.8) -> float | None:
    """The judged-query volume where the activation probability reaches ``target``,
    interpolated on log2(n) between the studied volumes (None: not reached)."""
    ns = sorted(rates)
    if rates[ns[0]] >= target:
        return float(ns[0])
    for a, b in zip(ns, ns[1:]):
        if rates[a] < target <= rates[b]:
            t = (target - rates[a]) / (rates[b] - rates[a])
            return float(2 ** (math.log2(a) + t * (math.log2(b) - math.log2(a))))
    return None


def analyze(
    seasons: list[Season],
    plain: list[Season] | None = None,
    baseline: dict | None = None,
    previous: dict | None = None,
    neutral: dict | None = None,
) -> dict:
    """Rates per cell: NEW and IDEAL from the shrunk learner's ``seasons``; the plain designs from
    ``plain`` where a cell has them, else from ``baseline`` (a results file written before
    shrinkage, whose seasons were the plain learner's: same draws, same code); SHARE30 from
    ``previous`` (a results file of the shrunk learner at the 30% validation share) and NEUTRAL from
    ``neutral`` (a results file of the risk-neutral shrunk learner at the 15% share) where they
    have the cell."""
    cells: dict[tuple[float, int], list[Season]] = {}
    for s in seasons:
        cells.setdefault((s.delta, s.n), []).append(s)
    plain_cells: dict[tuple[float, int], list[Season]] = {}
    for s in plain or ():
        plain_cells.setdefault((s.delta, s.n), []).append(s)
    table, sources = {}, {}
    for (d, n), ss in sorted(cells.items()):
        key = f"{d}:{n}"
        row = cell_rates(ss, (NEW, IDEAL))
        if (d, n) in plain_cells:
            plain_row = cell_rates(plain_cells[(d, n)], PLAIN_DESIGNS)
            row.update({k: plain_row[k] for k in PLAIN_DESIGNS}, plain_seasons=plain_row["seasons"])
            sources[key] = "this run"
        elif baseline is not None and key in baseline["cells"]:
            old = baseline["cells"][key]
            row.update({k: old[BASELINE_NAMES[k]] for k in PLAIN_DESIGNS}, plain_seasons=old["seasons"])
            sources[key] = "baseline"
        else:
            raise SystemExit(f"cell {key}: no plain-learner seasons and no baseline row; run --learner plain")
        if previous is not None and key in previous["cells"]:
            row.update({SHARE30: previous["cells"][key][NEW], "share30_seasons": previous["cells"][key]["seasons"]})
        if neutral is not None and key in neutral["cells"]:
            row.update({NEUTRAL: neutral["cells"][key][NEW], "neutral_seasons": neutral["cells"][key]["seasons"]})
        table[key] = row
    n80: dict = {}
    for delta in sorted({d for d, _ in cells}):
        if delta == 0.0:
            continue
        for design in DESIGNS:
            for kind in ("single", "season"):
                rows = [(n, table[f"{delta}:{n}"].get(design)) for (d, n) in cells if d == delta]
                rates = {n: r[kind] for n, r in rows if r is not None}
                n80[f"{delta}:{design}:{kind}"] = volume_for(rates) if rates else None
    return {"cells": table, "n80": n80, "plain_source": sources}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _volume(x: float | None, top: int) -> str:
    return f"> {top}" if x is None else f"{x:.0f}"


def markdown(result: dict, meta: dict) -> str:
    cells, n80 = result["cells"], result["n80"]
    designs = [d for d in DESIGNS if any(d in c for c in cells.values())]  # an earlier file's slot may be empty
    labels = {**DESIGN_LABELS, NEW: NEW_LABELS[meta.get("new_learner", "shrunk")]}
    deltas = sorted({float(k.split(":")[0]) for k in cells})
    volumes = sorted({int(k.split(":")[1]) for k in cells})
    top = {d: max(int(k.split(":")[1]) for k in cells if float(k.split(":")[0]) == d) for d in deltas}
    lines = [
        "# Planted-effect power study",
        "",
        f"Generated by `python -m benchmarks.power_study {meta['arguments']}` "
        f"({meta['cpu_seconds'] / 60:.0f} CPU-minutes of the shrunk learner's seasons, {meta['seasons']} owner-seasons"
        f"{'; the quick plan: 8 seasons per cell at δ = 0 and 4 at the other gains, so every rate below is known only to a wide interval' if meta.get('quick') else ''}). "
        "Each owner-season: n judged feedback "
        f"queries over {NIGHTS} nights, {HOLDOUT_QUERIES} holdout queries with complete relevant sets, the real "
        "proposal stage every night and the holdout summary; see `benchmarks/power_study.py` and "
        "`benchmarks/power_world.py` for the world.",
        "",
        meta["plain_note"],
        "",
        "Designs:",
        "",
        *[f"- **{d}** — {labels[d]}" for d in designs],
    ]
    if any(delta > 0.0 for delta in deltas):  # a run of null cells alone has no volume to reach
        lines += [
            "",
            "## Judged queries for 80% activation",
            "",
            "| true gain δ | design | one look | 10-night season |",
            "|---|---|---|---|",
        ]
    for delta in deltas:
        if delta == 0.0:
            continue
        for design in designs:
            lines.append(
                f"| +{delta:.2f} | {design} | {_volume(n80[f'{delta}:{design}:single'], top[delta])} | "
                f"{_volume(n80[f'{delta}:{design}:season'], top[delta])} |"
            )
    if 0.03 in deltas:
        lines += ["", "Against today's design at a true +0.03 (target ≤ 0.6×):", ""]
        for kind, title in (("single", "one look"), ("season", "10-night season")):
            new, today = n80.get(f"0.03:{NEW}:{kind}"), n80.get(f"0.03:{TODAY}:{kind}")
            share30, neutral = n80.get(f"0.03:{SHARE30}:{kind}"), n80.get(f"0.03:{NEUTRAL}:{kind}")
            if new is None:
                ratio = "new never reaches 80% in the studied volumes"
            elif today is None:
                ratio = f"≤ {new / volumes[-1]:.2f}× (today never reaches 80% up to n = {volumes[-1]})"
            else:
                ratio = f"{new / today:.2f}×"
            lines.append(
                f"- {title}: new {_volume(new, volumes[-1])} vs today {_volume(today, volumes[-1])} → {ratio} "
                f"(share30, the previous study's new: {_volume(share30, volumes[-1])}"
                + (f"; neutral: {_volume(neutral, volumes[-1])}" if NEUTRAL in designs else "")
                + ")"
            )
    for kind, title in (("single", "one look (the last night judged alone)"), ("season", "a 10-night season")):
        lines += [
            "",
            f"## Probability of activation, {title}",
            "",
            "| δ | design | " + " | ".join(f"n={n}" for n in volumes) + " |",
            "|---|---|" + "---|" * len(volumes),
        ]
        for delta in deltas:
            for design in designs:
                row = [cells[f"{delta}:{n}"].get(design) if f"{delta}:{n}" in cells else None for n in volumes]
                lines.append(
                    f"| {delta:.2f} | {design} | "
                    + " | ".join(
                        "not run"
                        if r is None
                        else f"{_pct(r[kind])} [{_pct(r[kind + '_ci'][0])}, {_pct(r[kind + '_ci'][1])}]"
                        for r in row
                    )
                    + " |"
                )
    lines += [
        "",
        "## False activation (δ = 0)",
        "",
        "| design | " + " | ".join(f"n={n}" for n in volumes) + " |",
        "|---|" + "---|" * len(volumes),
    ]
    season_counts = {NEW: "seasons", SHARE30: "share30_seasons", NEUTRAL: "neutral_seasons"}
    for design in (d for d in GATED if d in designs):
        null = [cells.get(f"0.0:{n}", {}) for n in volumes]
        lines.append(
            f"| {design}: one look / season | "
            + " | ".join(
                "not run"
                if design not in c
                else f"{c[design]['single']:.1%} / {c[design]['season']:.1%} "
                f"(≤ {c[design]['season_ci'][1]:.1%}, {c[season_counts.get(design, 'plain_seasons')]} seasons)"
                for c in null
            )
            + " |"
        )
    lines += [
        "",
        "## What decided the new design's single look (the last night), per cell",
        "",
        "| δ | n | seasons | " + " | ".join(STOPS) + " |",
        "|---|---|---|" + "---|" * len(STOPS),
    ]
    for delta in deltas:
        for n in (n for n in volumes if f"{delta}:{n}" in cells):
            cell = cells[f"{delta}:{n}"]
            stops = cell["new_single_stops"]
            lines.append(
                f"| {delta:.2f} | {n} | {cell['seasons']} | " + " | ".join(str(stops[k]) for k in STOPS) + " |"
            )
    lines += [
        "",
        "Brackets: Wilson 95% intervals; the bound in parentheses is the season rate's upper end.",
        "Activated profiles below their baseline (true gain < 0), over all cells: "
        + ", ".join(
            f"{d} {sum(c[d]['activated_below_baseline'] for c in cells.values() if d in c)}"
            for d in GATED
            if d in designs
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def earlier_cells(earlier: dict, name: str) -> set[tuple[float, int, int]]:
    """The (δ, n, seed) seasons an earlier results file was made of, read from the ``--cells`` of
    its recorded arguments (a run by plan cannot be pooled: its seeds are not written down)."""
    arguments = earlier["meta"]["arguments"].split()
    if "--cells" not in arguments:
        raise SystemExit(f"--pool-with {name}: its arguments name no --cells, so its seeds are unknown")
    return set(parse_cells(arguments[arguments.index("--cells") + 1]))


def check_disjoint(cells: list[tuple[float, int, int]], earlier: dict, name: str) -> None:
    """Refuse to pool runs that share a season (run before any season is drawn)."""
    shared = sorted(set(cells) & earlier_cells(earlier, name))
    if shared:
        raise SystemExit(
            f"--pool-with {name}: both runs hold {len(shared)} seasons, e.g. {shared[0]}; pool other seeds"
        )


def check_pool(cells: list[tuple[float, int, int]], earlier: list[tuple[str, dict]], learner: str) -> None:
    """Every ``--pool-with`` file: of this run's design, no season shared with this run or with
    another pooled file."""
    for i, (name, data) in enumerate(earlier):
        check_same_design(data, name, learner)
        check_disjoint(cells, data, name)
        for other_name, other in earlier[:i]:
            if other_name == name or earlier_cells(data, name) & earlier_cells(other, other_name):
                raise SystemExit(f"--pool-with {name} and {other_name}: they hold the same seasons; pool each once")


def design_config(learner: str = "shrunk") -> dict:
    """The resolved learning configuration a season of ``learner`` fits and gates with (what each
    covered look's report records): the design a results file's new rows are of."""
    return LEARNERS[learner].resolved().model_dump(mode="json")


def same_learner(recorded: dict) -> dict:
    """A recorded learner configuration as a design: a risk aversion left unset (None, recorded
    before the risk-averse default) chooses exactly as 0 does, so it compares as 0."""
    if recorded.get("shrinkage_risk_aversion") is None:
        return {**recorded, "shrinkage_risk_aversion": 0.0}
    return recorded


def _differences(recorded: dict, ours: dict) -> str:
    """Where two learner configurations differ, as the refusals name it ("" where they agree)."""
    differ = sorted(k for k in set(recorded) | set(ours) if recorded.get(k) != ours.get(k))
    return ", ".join(f"{k} {recorded.get(k)!r} there, {ours.get(k)!r} here" for k in differ)


def check_same_design(earlier: dict, name: str, learner: str = "shrunk") -> None:
    """Refuse to pool with a results file of another design: its recorded learner configuration
    must be this run's (``learner``'s). A file that records none (written before the study recorded
    it, such as the 30%-share null extensions) cannot be pooled."""
    recorded = earlier["meta"].get("learner_config")
    if recorded is None:
        raise SystemExit(
            f"--pool-with {name}: it records no learner configuration, so its design is unknown; "
            "pool only with a results file written since the study records one (meta.learner_config)"
        )
    shown = _differences(same_learner(recorded), same_learner(design_config(learner)))
    if shown:
        raise SystemExit(f"--pool-with {name}: another design ({shown}); pool only runs of the same configuration")


def check_neutral(neutral: dict, name: str, learner: str) -> None:
    """Refuse a ``--neutral`` results file that is not the risk-neutral twin of this run's design:
    it must record the same learner configuration but for ``shrinkage_risk_aversion``, which it
    leaves unset or 0 (the factor chosen by held-out NDCG alone), so its rows are the same draws
    judged by the same gates."""
    recorded = neutral["meta"].get("learner_config")
    if recorded is None:
        raise SystemExit(f"--neutral {name}: it records no learner configuration, so its design is unknown")
    recorded = same_learner(recorded)
    aversion = recorded["shrinkage_risk_aversion"]
    if aversion != 0.0:
        raise SystemExit(f"--neutral {name}: its learner is risk-averse (shrinkage_risk_aversion {aversion!r})")
    shown = _differences(recorded, {**design_config(learner), "shrinkage_risk_aversion": 0.0})
    if shown:
        raise SystemExit(f"--neutral {name}: another design beyond the risk aversion ({shown})")


def check_seasons_config(seasons: list[Season], learner: str = "shrunk") -> None:
    """Refuse seasons whose reports were fitted with another configuration than this code's
    ``learner`` (e.g. pickles an earlier version left in ``--out``)."""
    ours = same_learner(design_config(learner))
    for season in seasons:
        for look in season.looks:
            if look.offline and same_learner(look.offline["config"]) != ours:
                raise SystemExit(
                    f"season d{season.delta:.2f}_n{season.n}_s{season.seed}: fitted with another configuration "
                    "than this code's; move its folder aside or pass another --out"
                )


def pooled_null(result: dict, earlier: list[dict]) -> list[dict]:
    """The new design's false activations at δ = 0 over this run's seasons and earlier results
    files' (``earlier``, the same code, no season in two of them: ``check_disjoint``), per volume
    this run and at least one earlier file hold: the counts add, and the Wilson bound is the
    pooled one."""
    rows = []
    for key in sorted(result["cells"], key=lambda k: (float(k.split(":")[0]), int(k.split(":")[1]))):
        thens = [e["cells"][key] for e in earlier if key in e["cells"]]
        if float(key.split(":")[0]) != 0.0 or not thens:
            continue
        now = result["cells"][key]
        hits = {kind: sum(round(c[NEW][kind] * c["seasons"]) for c in (now, *thens)) for kind in ("single", "season")}
        before = sum(c["seasons"] for c in thens)
        trials = now["seasons"] + before
        rows.append(
            {
                "n": int(key.split(":")[1]),
                "this_run": now["seasons"],
                "earlier": before,
                "single": hits["single"],
                "season": hits["season"],
                "seasons": trials,
                "season_upper": wilson(hits["season"], trials)[1],
            }
        )
    return rows


def pooled_markdown(rows: list[dict], names: list[str]) -> str:
    """``pooled_null``'s rows as a section to append to this run's tables."""
    lines = [
        "",
        f"## False activation (δ = 0), this run pooled with {', '.join(f'`{n}`' for n in names)}",
        "",
        "The new design's activations (one look / season) over the runs' seasons (no season in two runs).",
        "",
        "| n | this run | earlier | pooled one look | pooled season | season's upper 95% bound |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['this_run']} | {r['earlier']} | {r['single']} of {r['seasons']} | "
            f"{r['season']} of {r['seasons']} | {r['season_upper']:.1%} |"
        )
    return "\n".join(lines) + "\n"


def chart(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = result["cells"]
    deltas = sorted({float(k.split(":")[0]) for k in cells})
    volumes = sorted({int(k.split(":")[1]) for k in cells})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    styles = {TODAY: ":", SHARE30: "-.", NEUTRAL: (0, (5, 1, 1, 1, 1, 1)), NEW: "-", IDEAL: "--"}  # v3, gates: tables
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(deltas)))
    for ax, kind, title in ((axes[0], "single", "one look"), (axes[1], "season", "10-night season")):
        for colour, delta in zip(colours, deltas, strict=True):
            for design in styles:
                if design == IDEAL and delta == 0.0:
                    continue
                ns = [n for n in volumes if design in cells.get(f"{delta}:{n}", {})]
                if not ns:
                    continue
                ys = [cells[f"{delta}:{n}"][design][kind] for n in ns]
                ax.plot(
                    ns, ys, linestyle=styles[design], color=colour, marker="o", ms=3, label=f"δ={delta:.2f} {design}"
                )
        ax.axhline(0.8, color="grey", lw=0.6)
        ax.axhline(0.05, color="red", lw=0.6)
        ax.set_xscale("log", base=2)
        ax.set_xticks(volumes, [str(n) for n in volumes])
        ax.set_xlabel("judged feedback queries (n)")
        ax.set_title(f"P(activation), {title}")
    axes[0].set_ylabel("probability")
    axes[1].legend(fontsize=6, ncol=2, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _rerun_arguments(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--out":
            skip = True
        elif a != "--analyze-only" and not a.startswith("--out="):
            out.append(a)
    return out


def parse_cells(spec: str) -> list[tuple[float, int, int]]:
    """``delta:n:seeds,…`` → the planned (δ, n, seed) triples: seeds 0 … seeds − 1 per cell, or
    ``first-last`` (both included) for more seasons of a cell an earlier run drew seeds for."""
    cells = []
    for part in spec.split(","):
        d, n, k = part.split(":")
        first, _, last = k.partition("-")
        seeds = range(int(first), int(last) + 1) if last else range(int(k))
        if not seeds:
            raise SystemExit(f"--cells {part}: no seeds in {k!r} (first-last with first ≤ last, or a count ≥ 1)")
        cells += [(float(d), int(n), s) for s in seeds]
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SCRATCH)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--quick", action="store_true", help="8 null and 4 other seasons per cell")
    parser.add_argument("--medium", action="store_true", help="36 null, 20 at +0.03 and 6 other seasons per cell")
    parser.add_argument("--cells", help="instead of a plan: delta:n:seeds,… e.g. 0.03:400:20,0.0:400:24")
    parser.add_argument(
        "--learner",
        choices=("shrunk", "averse", "neutral", "plain", "both"),
        default="both",
        help="whose seasons to run: the shrunk learner's (NEW; risk-averse, today's default), the same under "
        "its explicit name (averse), the risk-neutral shrunk learner's (NEW instead: the default before), "
        "the plain one's (today, v3, gates) or both (shrunk and plain)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=RESULTS / "plain-learner.json",
        help="a results file written before shrinkage (default: the committed pre-shrinkage study, 344 owner-seasons): "
        "the plain designs' rows for cells without plain seasons",
    )
    parser.add_argument(
        "--previous",
        type=Path,
        default=RESULTS / "share-30.json",
        help="the committed study of the shrunk learner at the 30%% validation share (default "
        "benchmarks/results/power/share-30.json): the share30 design's rows",
    )
    parser.add_argument(
        "--neutral",
        type=Path,
        help="a results file of the risk-neutral shrunk learner with the same draws (e.g. the committed "
        "benchmarks/results/power/results.json, the study before the risk-averse default): the neutral "
        "design's rows",
    )
    parser.add_argument(
        "--pool-with",
        type=Path,
        action="append",
        default=[],
        help="a results file of the same design (its meta.learner_config) with other seeds (e.g. "
        "benchmarks/results/power/averse.json): the δ = 0 cells' false activations pooled with this run's "
        "(repeat it to pool several runs, e.g. an extension run in parts)",
    )
    parser.add_argument("--analyze-only", action="store_true")
    parser.add_argument("--update-results", action="store_true")
    parser.add_argument(
        "--results-name",
        default="averse",
        help="file stem of what --update-results writes under benchmarks/results/power/ (default averse: the "
        "committed study of today's design; results is the risk-neutral study's, before the default changed; "
        "another stem for an extension run)",
    )
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.results_name):
        parser.error(f"--results-name {args.results_name!r}: a file stem of letters, digits, '-' and '_'")
    for path in args.pool_with:
        if not path.is_file():
            parser.error(f"--pool-with {path}: no such results file")
    if args.neutral is not None and not args.neutral.is_file():
        parser.error(f"--neutral {args.neutral}: no such results file")
    new_learner = args.learner if args.learner in ("averse", "neutral") else "shrunk"  # whose seasons NEW's rows are
    cells = parse_cells(args.cells) if args.cells else plan(DELTAS, VOLUMES, args.quick, args.medium)
    baseline = json.loads(args.baseline.read_text()) if args.baseline.exists() else None
    earlier = [(path.name, json.loads(path.read_text())) for path in args.pool_with]
    check_pool(cells, earlier, new_learner)
    if baseline is not None and "plain_source" in baseline:
        raise SystemExit(f"{args.baseline}: written by this version; --baseline takes a pre-shrinkage results file")
    neutral = None if args.neutral is None else json.loads(args.neutral.read_text())
    if neutral is not None:
        check_neutral(neutral, args.neutral.name, new_learner)
    if not args.analyze_only:
        for learner in ("shrunk", "plain") if args.learner == "both" else (args.learner,):
            run(cells, args.out, args.workers, learner)
    started = time.perf_counter()
    seasons = load(args.out, cells, new_learner)
    plain = load(args.out, cells, "plain")
    print(f"{len(seasons)} + {len(plain)} seasons loaded; deciding every look", file=sys.stderr, flush=True)
    check_seasons_config(seasons, new_learner)
    previous = json.loads(args.previous.read_text()) if args.previous.exists() else None
    result = analyze(seasons, plain, baseline, previous, neutral)
    from_baseline = sorted(k for k, v in result["plain_source"].items() if v == "baseline")
    plain_note = (
        "The plain designs (today, v3, gates) were judged on this run's plain-learner seasons."
        if not from_baseline
        else f"The plain designs' rows of {len(from_baseline)} cells ({', '.join(from_baseline)}) are the "
        f"committed pre-shrinkage study's ({baseline['meta']['seasons']} owner-seasons, "  # type: ignore[index]
        "its `today`, `v3` and `new`): the same draws and the same code for the plain learner, "
        "with that study's season counts (column `plain_seasons` in "
        f"{args.results_name}.json)."
    )
    meta = {
        # how to regenerate: the seasons' own arguments (where they were kept and whether this call ran them change nothing)
        "arguments": " ".join(a for a in _rerun_arguments(argv if argv is not None else sys.argv[1:])),
        "plain_note": plain_note,
        "seasons": len(seasons),
        "quick": args.quick,
        "medium": args.medium,
        "cpu_seconds": sum(s.seconds for s in seasons),
        "analysis_seconds": time.perf_counter() - started,
        "nights": NIGHTS,
        "holdout_queries": HOLDOUT_QUERIES,
        "new_learner": new_learner,
        "learner_config": design_config(new_learner),
        "world": {
            "pool": world.POOL,
            "returned": world.RETURNED,
            "noise": world.NOISE,
            "covered_share": world.COVERED_SHARE,
            "missed": world.MISSED,
            "wrong": world.WRONG,
            "beta": {str(d): world.calibrate(d) for d in sorted({s.delta for s in seasons})},
        },
    }
    text = markdown(result, meta)
    if earlier:
        names = [name for name, _ in earlier]
        pooled = pooled_null(result, [data for _, data in earlier])
        result["pooled_null"] = {"with": names[0] if len(names) == 1 else names, "rows": pooled}
        text += pooled_markdown(pooled, names)
    print(text)
    target = RESULTS if args.update_results else args.out
    target.mkdir(parents=True, exist_ok=True)
    stem = args.results_name
    chart_name = "power.png" if stem == "results" else f"{stem}.png"
    (target / f"{stem}.md").write_text(text)
    (target / f"{stem}.json").write_text(json.dumps({"meta": meta, **result}, indent=1, sort_keys=True))
    chart(result, target / chart_name)
    print(f"wrote {target}/{stem}.md, {stem}.json and {chart_name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
