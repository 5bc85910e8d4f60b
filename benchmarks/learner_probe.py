"""Learner probe (issue 26 exploration): one planted owner through the real proposal stage, with
the pool search swappable, so a learner variant is judged in seconds.

For one owner (δ, n, seed; the same draws as ``power_study.run_season``'s last night) it runs
``prepare`` → ``evaluate_prepared`` (the real fit, cross-fitting and version-3 offline gate)
and the new design's holdout summary, and measures what the study cannot see:

* the proposal's TRUE gain (3,000-query truth sample) and each cross-fit fold proposal's;
* the offline gate with a perfect learner (the planted profile in every role: same groups,
  same labels, same statistic) — the statistic's own power;
* the proposal fitted on ALL judged groups (no split) — what the split costs the learner.

Variants replace ``offline.search`` (each call: one objective over a set of training pools);
they only ever see training pools, so validation labels choose nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from benchmarks import power_study as ps
from benchmarks import power_world as world
from prme_core.learning import offline, pool_fit
from prme_core.learning.bootstrap import sign_flip_p_value
from prme_core.learning.full_retrieval import FullRetrievalEvaluationConfig, summarize_groups
from prme_core.learning.observations import prepare
from prme_core.learning.pool_fit import POOL_NDCG_ALGORITHM, Parameters, PoolObjective, SearchResult, identity
from prme_core.learning.pool_ranking import PoolSet
from prme_core.learning.snapshot import snapshot_from_receipts
from prme_core.retrieval.multipliers import FACTOR_COUNT

BETAS = {0.0: 0.0, 0.03: 0.13281}
"""``power_world.calibrate`` (38 s a value; the study's bisection gives these)."""
_ORIGINAL_SEARCH = pool_fit.search
_ORIGINAL_POOLSET = offline.PoolSet


class _RememberingPoolSet(PoolSet):
    """A PoolSet that keeps its requests, so a variant can fit on subsets of the training pools."""

    def __init__(self, requests, layout=None):  # noqa: ANN001
        super().__init__(requests, layout)
        self.source = list(requests)


def _sub_objective(obj: PoolObjective, groups: np.ndarray) -> PoolObjective:
    """The same objective over the requests of ``groups`` (local group indices; repeats allowed,
    a repeated group enters once per draw: a bootstrap resample)."""
    rows, new_groups = [], []
    by_group: dict[int, list[int]] = {}
    for i, g in enumerate(obj.request_group.tolist()):
        by_group.setdefault(g, []).append(i)
    for j, g in enumerate(groups.tolist()):
        for i in by_group[g]:
            rows.append(i)
            new_groups.append(j)
    pools = PoolSet([obj.pools.source[i] for i in rows], obj.pools.layout)
    return PoolObjective(
        pools,
        np.array(new_groups, dtype=np.int64),
        algorithm=obj.algorithm,
        k=obj.k,
        regularization=obj.regularization,
        margin_scale=obj.margin_scale,
        base_interactions=obj.base_interactions,
        ndcg_margin=obj.ndcg_margin,
    )


def _finish(obj: PoolObjective, family, params: Parameters, evaluations: int) -> SearchResult:  # noqa: ANN001
    """A result the report accepts: the final point, or the identity when the final point does
    worse on the training objective (a training-only fallback; the report requires training
    loss not to increase)."""
    start = identity(family, obj.base_interactions)
    at_identity, value = obj.value(start), obj.value(params)
    if value < at_identity:
        params, value = start, at_identity
    return SearchResult(params, at_identity, value, evaluations)


_shrunk = pool_fit.shrink  # the product's shrinkage (adopted from this probe's variant)


def _mean_params(ps_: list[Parameters]) -> Parameters:
    logs = tuple(float(np.mean([p.log_multipliers[i] for p in ps_])) for i in range(FACTOR_COUNT))
    inter = None
    if ps_[0].interactions is not None:
        inter = tuple(float(np.mean([p.interactions[i] for p in ps_])) for i in range(len(ps_[0].interactions)))
    return Parameters(logs, inter)


def _true_ndcg(obj: PoolObjective, p: Parameters) -> float:
    """Mean judged NDCG@k (no margin, no penalty) of ``obj``'s groups under ``p``."""
    ranking = obj.pools.rank(p.adjustment())
    ndcg, _ = obj.pools.judged_metrics(ranking, obj.k)
    return obj.group_mean(ndcg)


# --- variants -------------------------------------------------------------------------------------


def variant_search(name: str, opts: dict):  # noqa: ANN201
    def base(objective, *, family, seed, starts, passes_per_step):  # noqa: ANN001, ANN202
        if "reg" in opts:
            objective.regularization = opts["reg"]
        if "margin" in opts:
            objective.ndcg_margin = opts["margin"]
        starts = opts.get("starts", starts)
        if opts.get("betas_only"):
            free = range(FACTOR_COUNT, FACTOR_COUNT + 3)
            return _restricted_search(objective, family, seed, starts, passes_per_step, free=free)
        if opts.get("freeze_constant"):
            free = [*_varying_factors(objective.pools), *range(FACTOR_COUNT, FACTOR_COUNT + 3)]
            return _restricted_search(objective, family, seed, starts, passes_per_step, free=free)
        return _ORIGINAL_SEARCH(objective, family=family, seed=seed, starts=starts, passes_per_step=passes_per_step)

    def skip_alternative(fn):  # noqa: ANN001, ANN202
        def wrapped(objective, *, family, seed, starts, passes_per_step):  # noqa: ANN001, ANN202
            if objective.algorithm != POOL_NDCG_ALGORITHM and not opts.get("alternative"):
                p = identity(family, objective.base_interactions)
                v = objective.value(p)
                return SearchResult(p, v, v, 1)
            return fn(objective, family=family, seed=seed, starts=starts, passes_per_step=passes_per_step)

        return wrapped

    if name == "base":
        return skip_alternative(base)

    if name == "reg":  # a stronger pull toward the identity (a fixed value chosen on simulations)
        strength = opts["reg"]

        def reg(objective, **kw):  # noqa: ANN001, ANN003, ANN202
            objective.regularization = strength
            found = base(objective, **kw)
            return found

        return skip_alternative(reg)

    if name == "margin":
        margin = opts["margin"]

        def marg(objective, **kw):  # noqa: ANN001, ANN003, ANN202
            objective.ndcg_margin = margin
            return base(objective, **kw)

        return skip_alternative(marg)

    if name == "pairwise":  # the smoother objective as the proposal

        def pw(objective, **kw):  # noqa: ANN001, ANN003, ANN202
            if objective.algorithm == POOL_NDCG_ALGORITHM:
                objective.algorithm = pool_fit.POOL_PAIRWISE_ALGORITHM
                objective.regularization = opts.get("reg", 0.01)
                found = base(objective, **kw)
                objective.algorithm = POOL_NDCG_ALGORITHM
                objective.regularization = opts.get("ndcg_reg", objective.regularization)
                return _finish(objective, kw["family"], found.parameters, found.evaluations)
            return base(objective, **kw)

        return skip_alternative(pw)

    if name == "shrink_cv":  # shrink toward identity by λ chosen on inner folds of the training groups
        grid = opts.get("grid", (0.0, 0.25, 0.5, 0.75, 1.0))
        inner = opts.get("inner", 3)

        def shrink(objective, *, family, seed, starts, passes_per_step):  # noqa: ANN001, ANN202
            kw = dict(family=family, seed=seed, starts=starts, passes_per_step=passes_per_step)
            full = base(objective, **kw)
            g = objective.groups
            perm = np.random.Generator(np.random.PCG64(seed + 7)).permutation(g)
            fold = np.empty(g, dtype=np.int64)
            fold[perm] = np.arange(g) % inner
            scores = np.zeros(len(grid))
            for k in range(inner):
                tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
                fit = base(_sub_objective(objective, tr), **kw).parameters
                test = _sub_objective(objective, te)
                for j, lam in enumerate(grid):
                    scores[j] += len(te) * _true_ndcg(test, _shrunk(fit, objective.base_interactions, lam))
            best = max(range(len(grid)), key=lambda j: (round(scores[j], 12), -grid[j]))
            shrink.chosen.append(grid[best])
            p = _shrunk(full.parameters, objective.base_interactions, grid[best])
            if opts.get("separate"):  # λ for the multipliers and λ for the interaction weights, each by inner CV
                pair_scores = {}
                for k in range(inner):
                    tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
                    fit = base(_sub_objective(objective, tr), **kw).parameters
                    test = _sub_objective(objective, te)
                    for lm in grid:
                        for lb in grid:
                            q = Parameters(
                                _shrunk(fit, objective.base_interactions, lm).log_multipliers,
                                _shrunk(fit, objective.base_interactions, lb).interactions,
                            )
                            pair_scores[(lm, lb)] = pair_scores.get((lm, lb), 0.0) + len(te) * _true_ndcg(test, q)
                lm, lb = max(pair_scores, key=lambda key: (round(pair_scores[key], 12), -key[0], -key[1]))
                p = Parameters(
                    _shrunk(full.parameters, objective.base_interactions, lm).log_multipliers,
                    _shrunk(full.parameters, objective.base_interactions, lb).interactions,
                )
            return _finish(objective, family, p, full.evaluations)

        shrink.chosen = []  # type: ignore[attr-defined]
        return skip_alternative(shrink)

    if name == "screen_cv":  # free only the parameters that, fitted alone, gain on inner folds of the training groups
        inner = opts.get("inner", 3)
        threshold = opts.get("threshold", 0.0)

        def screen(objective, *, family, seed, starts, passes_per_step):  # noqa: ANN001, ANN202
            g = objective.groups
            perm = np.random.Generator(np.random.PCG64(seed + 7)).permutation(g)
            fold = np.empty(g, dtype=np.int64)
            fold[perm] = np.arange(g) % inner
            splits = []
            for k in range(inner):
                tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
                splits.append((_sub_objective(objective, tr), _sub_objective(objective, te), len(te)))
            start = identity(family, objective.base_interactions)
            base_scores = [(_true_ndcg(te, start), w) for _, te, w in splits]
            candidates = opts.get("candidates") or list(range(FACTOR_COUNT + 3))
            chosen = []
            for index in candidates:
                gain = 0.0
                for (tr, te, w), (b, _) in zip(splits, base_scores, strict=True):
                    fit = _restricted_search(tr, family, seed, 0, passes_per_step, free=[index]).parameters
                    gain += w * (_true_ndcg(te, fit) - b)
                if gain / g > threshold:
                    chosen.append(index)
            screen.chosen.append(tuple(chosen))
            if not chosen:
                v = objective.value(start)
                return SearchResult(start, v, v, 1)
            found = _restricted_search(objective, family, seed, starts, passes_per_step, free=chosen)
            return _finish(objective, family, found.parameters, found.evaluations)

        screen.chosen = []  # type: ignore[attr-defined]
        return skip_alternative(screen)

    if name == "bag":  # average the parameters of fits to bootstrap resamples of the training groups
        bags = opts.get("bags", 8)

        def bag(objective, *, family, seed, starts, passes_per_step):  # noqa: ANN001, ANN202
            kw = dict(family=family, seed=seed, starts=opts.get("bag_starts", starts), passes_per_step=passes_per_step)
            rng = np.random.Generator(np.random.PCG64(seed + 11))
            fits, evals = [], 0
            for _ in range(bags):
                draw = rng.integers(0, objective.groups, objective.groups)
                found = base(_sub_objective(objective, draw), **kw)
                fits.append(found.parameters)
                evals += found.evaluations
            return _finish(objective, family, _mean_params(fits), evals)

        return skip_alternative(bag)

    if name == "betas_only":  # fewer free parameters: multipliers fixed at 1, the interaction weights fitted

        def betas(objective, *, family, seed, starts, passes_per_step):  # noqa: ANN001, ANN202
            return _restricted_search(
                objective, family, seed, starts, passes_per_step, free=range(FACTOR_COUNT, FACTOR_COUNT + 3)
            )

        return skip_alternative(betas)

    raise ValueError(name)


def _varying_factors(pools: PoolSet) -> list[int]:
    """Multipliers whose feature varies within some training pool: a feature that is constant in
    every pool only shifts scores and renormalizes (a global rescale the interaction weights
    already span), so its multiplier is a redundant direction of the search."""
    from prme_core.retrieval.config import WEIGHT_FIELDS

    out = []
    members = pools.member_request
    for i, name in enumerate(WEIGHT_FIELDS):
        col = pools.features[: members.size, pools.layout.index(name)]
        lo = np.full(pools.requests, np.inf)
        hi = np.full(pools.requests, -np.inf)
        np.minimum.at(lo, members, col)
        np.maximum.at(hi, members, col)
        if np.any(hi - lo > 1e-12):
            out.append(i)
    return out


def _restricted_search(objective, family, seed, starts, passes_per_step, free):  # noqa: ANN001, ANN202
    """``pool_fit.search`` over a subset of the parameters (the others stay at the identity)."""
    from prme_core.learning.fit import IMPROVEMENT_EPSILON, STEP_SCHEDULE
    from prme_core.learning.pool_fit import _HIGH, _LOW, BETA_STEPS
    from prme_core.retrieval.config import MAX_INTERACTION_WEIGHT

    free = list(free)
    start = identity(family, objective.base_interactions)
    best, best_value = start, objective.value(start)
    at_identity = best_value
    rng = np.random.Generator(np.random.PCG64(seed))
    for _ in range(starts):
        v = start.values()
        for i in free:
            v[i] = (
                float(rng.uniform(0.0, MAX_INTERACTION_WEIGHT))
                if i >= FACTOR_COUNT
                else float(rng.uniform(-math.log(2), math.log(2)))
            )
        trial = Parameters(tuple(v[:FACTOR_COUNT]), tuple(v[FACTOR_COUNT:]))
        value = objective.value(trial)
        if value > best_value + IMPROVEMENT_EPSILON:
            best, best_value = trial, value
    for log_step, beta_step in zip(STEP_SCHEDULE, BETA_STEPS, strict=True):
        for _ in range(passes_per_step):
            moved = False
            for index in free:
                step, low, high = (
                    (log_step, _LOW, _HIGH) if index < FACTOR_COUNT else (beta_step, 0.0, MAX_INTERACTION_WEIGHT)
                )
                for move in (-step, step):
                    current = best.values()[index]
                    value_at = min(max(current + move, low), high)
                    if value_at == current:
                        continue
                    trial = best.with_value(index, value_at)
                    value = objective.value(trial)
                    if value > best_value + IMPROVEMENT_EPSILON:
                        best, best_value, moved = trial, value, True
            if not moved:
                break
    return SearchResult(best, at_identity, best_value, objective.evaluations)


@contextlib.contextmanager
def learner(name: str, opts: dict | None = None):  # noqa: ANN201
    """Patch the proposal stage's pool search (and keep it to one thread)."""
    fn = variant_search(name, opts or {})
    one = ThreadPoolExecutor(max_workers=1)
    saved = (offline.search, offline.PoolSet, offline._fit_pool)
    offline.search, offline.PoolSet, offline._fit_pool = fn, _RememberingPoolSet, (lambda: one)
    try:
        yield fn
    finally:
        offline.search, offline.PoolSet, offline._fit_pool = saved
        one.shutdown()


# --- one owner ------------------------------------------------------------------------------------


def build_owner(delta: float, n: int, seed: int):  # noqa: ANN201
    """The study's owner-season draws (``run_season``), judged at its last night (all n)."""
    beta = BETAS[delta] if delta in BETAS else world.calibrate(delta)
    tag = f"power:{delta}:{n}:{seed}"
    rng = np.random.default_rng([int(delta * 1e4), n, seed])
    feedback = world.draw_queries(rng, beta, n, f"feedback {seed}")
    holdout = world.Holdout(world.draw_queries(rng, beta, ps.HOLDOUT_QUERIES, f"holdout {seed}"), tag)
    receipts, records = [], []
    for i, q in enumerate(feedback):
        receipt, ids = world.receipt_of(q, f"{tag}:feedback:{i}")
        relevant = {ids[j] for j in q.relevant}
        records.append(world.feedback_record(receipt, relevant, f"{tag}:record:{i}"))
        receipts.append((receipt, ps._checksum(receipt)))
    snapshot = snapshot_from_receipts(world.OWNER, receipts, records)
    prepared = prepare(snapshot, owner=world.OWNER, scopes=list(world.SCOPES), config=ps.PLAIN_CONFIG)
    return prepared, holdout, beta


def _gate(diffs: np.ndarray, pairs: np.ndarray, val_gain: float, cfg) -> tuple[bool, float]:  # noqa: ANN001
    p = sign_flip_p_value(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed)
    ok = val_gain >= -1e-12 and diffs.mean() >= cfg.min_ndcg_gain and pairs.mean() >= -1e-12 and p <= cfg.max_p_value
    return bool(ok), float(p)


def probe(delta: float, n: int, seed: int, name: str = "base", opts: dict | None = None, extras: bool = True) -> dict:
    started = time.perf_counter()
    prepared, holdout, beta = build_owner(delta, n, seed)
    cfg = prepared.config
    with learner(name, opts):
        report = offline.evaluate_prepared(prepared)
    out: dict = {"delta": delta, "n": n, "seed": seed, "variant": name, "opts": opts or {}}
    out["decision"] = report.decision
    out["passed"] = report.decision == "improved_on_observed_candidates"
    out["evidence_gain"] = report.evidence_ndcg_gain
    out["evidence_p"] = report.evidence_sign_flip_p
    out["validation_gain"] = report.validation_ndcg_gain
    out["true_gain"] = ps.holdout_true_gain(report.multipliers, beta, seed)
    out["fold_true_gains"] = [ps.holdout_true_gain(m, beta, seed) for m in report.crossfit_multipliers]
    out["mult"] = report.multipliers.model_dump()
    ndcg, recall = holdout.metrics(report.multipliers)
    zeros = np.zeros(holdout.size)
    hcfg = FullRetrievalEvaluationConfig().resolved(look=1, offline_look=ps.NIGHTS, offline_alpha=cfg.max_p_value)
    summary = summarize_groups(
        {"ndcg": holdout.base[0], "recall": holdout.base[1], "mrr": zeros},
        {"ndcg": ndcg, "recall": recall, "mrr": zeros},
        hcfg,
    )
    out["holdout_pass"] = summary["decision"] == "improved_full_retrieval"
    out["holdout"] = {k: summary[k] for k in ("ndcg_gain", "recall_gain", "harm", "severe_share", "sign_flip_p")}
    out["holdout_bounds"] = {
        "alpha": hcfg.max_p_value,
        "max_mean_harm": hcfg.max_mean_harm,
        "max_severe_share": hcfg.max_severe_share,
    }
    ev = np.array(
        [q.candidate_ndcg - q.baseline_ndcg for q in report.queries if q.split == "validation"]
        + [c.candidate_ndcg - c.baseline_ndcg for c in (report.crossfit or ())]
    )
    out["evidence_sd"] = float(ev.std(ddof=1)) if ev.size > 1 else None
    out["evidence_changed"] = float(np.mean(np.abs(ev) > 1e-12)) if ev.size else None
    out["activated"] = out["passed"] and out["holdout_pass"]
    if extras:
        # the same evidence groups, every role played by the planted profile (a perfect learner)
        used = sorted(prepared.pools)
        pos = {r: j for j, r in enumerate(used)}
        everything = PoolSet([prepared.pools[i] for i in used])
        b_ndcg, b_pair = everything.judged_metrics(everything.rank(None, recorded=True), cfg.ndcg_k)
        p_ndcg, p_pair = everything.judged_metrics(everything.rank(world.planted_profile(beta)), cfg.ndcg_k)
        d, dp, val = [], [], []
        for g in sorted(prepared.groups):
            info = prepared.groups[g]
            idx = [pos[i] for i in info.requests if i in pos]
            if not idx:
                continue
            d.append(float(np.mean(p_ndcg[idx] - b_ndcg[idx])))
            dp.append(float(np.mean(p_pair[idx] - b_pair[idx])))
            if info.validation:
                val.append(d[-1])
        ok, p = _gate(np.array(d), np.array(dp), float(np.mean(val)), cfg)
        out["planted_offline_pass"], out["planted_offline_p"], out["planted_evidence_gain"] = ok, p, float(np.mean(d))
        out["planted_evidence_sd"] = float(np.std(d, ddof=1))
        pn, pr = holdout.metrics(world.planted_profile(beta))
        ps_ = summarize_groups(
            {"ndcg": holdout.base[0], "recall": holdout.base[1], "mrr": zeros},
            {"ndcg": pn, "recall": pr, "mrr": zeros},
            hcfg,
        )
        out["planted_holdout_pass"] = ps_["decision"] == "improved_full_retrieval"
        out["planted_activated"] = ok and out["planted_holdout_pass"]
        out["planted_true_gain"] = ps.holdout_true_gain(world.planted_profile(beta), beta, seed)
        # validation groups only (today's evidence), planted profile
        okv, pv = _gate(np.array(val), np.zeros(1), float(np.mean(val)), cfg)
        out["planted_validation_only_pass"] = okv
        # the learner fitted on every judged group (no split), and the planted profile's training objective value
        allpools = _RememberingPoolSet([prepared.pools[i] for i in used])
        gidx = {g: k for k, g in enumerate(sorted(prepared.groups))}
        req_group_all = np.array([gidx[prepared.requests[i].group] for i in used], dtype=np.int64)
        # compact group ids
        _, req_group_all = np.unique(req_group_all, return_inverse=True)
        obj = PoolObjective(
            allpools,
            req_group_all,
            algorithm=POOL_NDCG_ALGORITHM,
            k=cfg.ndcg_k,
            regularization=cfg.pool_regularization,
            margin_scale=cfg.margin_scale,
            base_interactions=offline._base_interactions(allpools),
            ndcg_margin=cfg.ndcg_margin,
        )
        fn = variant_search(name, opts or {})
        with learner(name, opts):
            found = fn(
                obj, family=cfg.family, seed=cfg.seed, starts=cfg.search_starts, passes_per_step=cfg.passes_per_step
            )
        out["allfit_true_gain"] = ps.holdout_true_gain(found.parameters.adjustment(), beta, seed)
    out["seconds"] = time.perf_counter() - started
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", default="base")
    parser.add_argument("--opts", default="{}")
    parser.add_argument("--deltas", default="0.03")
    parser.add_argument("--ns", default="200,400")
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--no-extras", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    a, b = (int(x) for x in args.seeds.split("-"))
    opts = json.loads(args.opts)
    with open(args.out, "a") as fh:
        for delta in (float(x) for x in args.deltas.split(",")):
            for n in (int(x) for x in args.ns.split(",")):
                for seed in range(a, b + 1):
                    row = probe(delta, n, seed, args.variant, opts, extras=not args.no_extras)
                    row["mult"] = {k: v for k, v in row["mult"].items() if v not in (1.0, 0.0)}
                    fh.write(json.dumps(row) + "\n")
                    fh.flush()
                    print(
                        f"{args.variant} d={delta} n={n} s={seed} true={row['true_gain']:+.4f} "
                        f"pass={row['passed']} p={row['evidence_p']:.3f} act={row['activated']} "
                        f"planted_pass={row.get('planted_offline_pass')} allfit={row.get('allfit_true_gain', float('nan')):+.4f} "
                        f"{row['seconds']:.1f}s",
                        file=sys.stderr,
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
