"""Offline proposal evaluation: fit multipliers on training groups, judge them on validation.

``evaluate_learning`` is pure and deterministic: the same snapshot, scope set, surface,
configuration and query groups give a byte-identical report. Validation labels never choose
weights or hyperparameters: the fit sees training pairs only, and validation metrics are
computed once, after the fit. Nothing here changes any active weight or profile.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from prme_core.errors import BaselineReplayMismatch, InvalidEvidence
from prme_core.gcpause import cyclic_gc_paused
from prme_core.learning.bootstrap import bootstrap_interval, sign_flip_p_value
from prme_core.learning.config import LearningConfig
from prme_core.learning.fit import (
    FIT_ALGORITHM,
    PairwiseObjective,
    coordinate_search,
    judged_metrics,
    proposed_scores,
)
from prme_core.learning.observations import Prepared, prepare
from prme_core.learning.pool_fit import (
    POOL_NDCG_ALGORITHM,
    POOL_PAIRWISE_ALGORITHM,
    PoolObjective,
    ShrinkageChoice,
    search,
    shrunk_search,
)
from prme_core.learning.pool_ranking import PoolSet, recorded_lists
from prme_core.learning.power import groups_for_power
from prme_core.learning.proposal import (
    LEARNING_INPUTS,
    AlternativeFit,
    CrossFitResult,
    LearningCoverage,
    LearningEvaluation,
    ProposalShrinkage,
    QueryLearningResult,
    evidence_differences,
    evidence_summary,
    learning_input_checksum,
    offline_gate,
    power_alpha,
)
from prme_core.learning.snapshot import FeedbackSnapshot
from prme_core.learning.split import crossfit_fold
from prme_core.retrieval.multipliers import FACTOR_COUNT, FAMILY_V1, UNITY, RankingMultipliers
from prme_core.validation import parse_model

REPORT_VERSION = 3
"""The report version new evaluations write (its offline gate is the screen)."""


@dataclass(frozen=True)
class ReplayCheck:
    exact: bool
    candidates: int
    mismatches: int
    worst_difference: float


def baseline_replay_check(prepared: Prepared) -> ReplayCheck:
    """Do judged candidates replay at unity to exactly their recorded base and final scores?"""
    judged = prepared.judged
    if judged.size == 0:
        return ReplayCheck(True, 0, 0, 0.0)
    unity = np.ones(FACTOR_COUNT)
    scores = proposed_scores(judged, unity)
    base = proposed_scores(dataclasses.replace(judged, layers=[]), unity)
    bad = (scores != judged.recorded) | (base != judged.recorded_base)
    worst = float(np.max(np.abs(scores - judged.recorded))) if bad.any() else 0.0
    return ReplayCheck(not bad.any(), judged.size, int(np.count_nonzero(bad)), worst)


def coverage_of(prepared: Prepared) -> LearningCoverage:
    return LearningCoverage(
        feedback_records=len(prepared.feedback_ids),
        requests_with_pairs=len(prepared.requests),
        training_queries=len(prepared.split_groups(False)),
        validation_queries=len(prepared.split_groups(True)),
        explicit_pairs=prepared.explicit_pairs,
    )


def coverage_sufficient(prepared: Prepared) -> bool:
    c, cfg = coverage_of(prepared), prepared.config
    return c.training_queries >= cfg.min_training_queries and c.validation_queries >= cfg.min_validation_queries


@cyclic_gc_paused()
def evaluate_prepared(prepared: Prepared) -> LearningEvaluation:
    cfg = prepared.config
    inputs = {name: getattr(prepared, name) for name in LEARNING_INPUTS}
    common: dict[str, Any] = dict(
        **inputs,
        config=cfg,
        input_checksum=learning_input_checksum(**inputs),
        feedback_ids=tuple(sorted(prepared.feedback_ids)),
        receipt_checksums=prepared.receipt_checksums,
        coverage=coverage_of(prepared),
        exclusions=prepared.exclusions,
        fit_path=prepared.path,
        fit_reason=prepared.path_reason,
    )
    pool = prepared.path == "pool"
    common.update(
        algorithm=_pool_algorithm(cfg) if pool else FIT_ALGORITHM,
        metric="pool_judged_ndcg" if pool else "judged_ndcg",
        family=cfg.family if pool else FAMILY_V1,
    )
    if not coverage_sufficient(prepared):
        return LearningEvaluation(**common, multipliers=UNITY, decision="insufficient_data")
    fitted = _pool_fit(prepared) if pool else _judged_fit(prepared)
    return _report(prepared, common, fitted)


@dataclass
class _Fitted:
    """A fit's outcome, whichever path produced it: per-request metrics of both arms."""

    multipliers: RankingMultipliers
    loss_before: float
    loss_after: float
    base: tuple[np.ndarray, np.ndarray]  # (NDCG, pairwise accuracy) per request at the baseline
    candidate: tuple[np.ndarray, np.ndarray]
    fit_requests: int
    search_evaluations: int | None = None
    alternative: tuple[str, RankingMultipliers, tuple[np.ndarray, np.ndarray], int] | None = None
    measured: list[int] | None = None
    """Indices of the requests the metrics arrays are for (None: every request, in order)."""
    folds: list[tuple[RankingMultipliers, tuple[np.ndarray, np.ndarray]]] | None = None
    """Per cross-fitting fold: the proposal fitted on the other folds' training requests and its
    metrics on every measured request (only the fold's own training requests are read)."""
    shrinkage: ShrinkageChoice | None = None
    """Pool fits with shrinkage: the factor the proposal was shrunk by and the inner folds' evidence."""
    fold_shrinkage: list[ShrinkageChoice | None] | None = None


def _fold_of(prepared: Prepared, request_group: np.ndarray) -> Callable[[int], int]:
    """Request index → the cross-fitting fold of its (training) group."""
    cfg, group_ids = prepared.config, sorted(prepared.groups)
    folds = cfg.crossfit_folds or 1
    by_group = {g: crossfit_fold(group_ids[g], seed=cfg.seed, folds=folds) for g in set(request_group.tolist())}
    return lambda i: by_group[int(request_group[i])]


def _judged_fit(prepared: Prepared) -> _Fitted:
    cfg = prepared.config
    check = baseline_replay_check(prepared)
    if not check.exact:
        raise BaselineReplayMismatch(
            f"baseline score replay mismatch on {check.mismatches} of {check.candidates} judged candidates "
            f"(largest difference {check.worst_difference:.3g}); the receipts cannot support learning"
        )
    request_group, validation_group = _group_index(prepared)
    training_requests = np.flatnonzero(~validation_group[request_group])
    train_groups = sorted({int(request_group[i]) for i in training_requests})
    local_group = {g: i for i, g in enumerate(train_groups)}
    objective = PairwiseObjective(
        judged=prepared.judged.subset(training_requests),
        request_group=np.array([local_group[int(request_group[i])] for i in training_requests], dtype=np.int64),
        margin_scale=cfg.margin_scale,
        regularization=cfg.regularization,
    )
    multipliers, loss_before, loss_after = coordinate_search(objective, cfg.passes_per_step)
    n_requests = len(prepared.requests)

    def fit_without(fold: int) -> tuple[RankingMultipliers, tuple[np.ndarray, np.ndarray]]:
        rows = np.array([i for i in training_requests if fold_of(int(i)) != fold], dtype=np.int64)
        local = {g: j for j, g in enumerate(sorted({int(request_group[i]) for i in rows}))}
        vector, _, _ = coordinate_search(
            PairwiseObjective(
                judged=prepared.judged.subset(rows),
                request_group=np.array([local[int(request_group[i])] for i in rows], dtype=np.int64),
                margin_scale=cfg.margin_scale,
                regularization=cfg.regularization,
            ),
            cfg.passes_per_step,
        )
        scores = proposed_scores(prepared.judged, vector)
        return RankingMultipliers.from_vector(vector), judged_metrics(prepared.judged, scores, n_requests, cfg.ndcg_k)

    fold_of = _fold_of(prepared, request_group)
    return _Fitted(
        multipliers=RankingMultipliers.from_vector(multipliers),
        loss_before=loss_before,
        loss_after=loss_after,
        base=judged_metrics(prepared.judged, prepared.judged.recorded, n_requests, cfg.ndcg_k),
        candidate=judged_metrics(
            prepared.judged, proposed_scores(prepared.judged, multipliers), n_requests, cfg.ndcg_k
        ),
        fit_requests=int(training_requests.size),
        folds=[fit_without(k) for k in range(cfg.crossfit_folds)] if cfg.crossfit_folds else None,
    )


def _pool_algorithm(cfg: LearningConfig) -> str:
    return POOL_PAIRWISE_ALGORITHM if cfg.fit == "pool_pairwise" else POOL_NDCG_ALGORITHM


def pool_replay_check(prepared: Prepared) -> ReplayCheck:
    """Do the recorded pools, re-ranked under each request's recorded adjustment, reproduce every
    returned list exactly (ids, order and scores)? Checked for every request the fit uses."""
    if not prepared.pools:
        return ReplayCheck(True, 0, 0, 0.0)
    used = sorted(prepared.pools)
    pools = PoolSet([prepared.pools[i] for i in used])
    lists = recorded_lists(pools.rank(None, recorded=True), pools)
    bad, worst = 0, 0.0
    for (ids, scores), i in zip(lists, used, strict=True):
        want_ids, want_scores = prepared.returned[i]
        if tuple(ids) != want_ids or tuple(scores) != want_scores:
            bad += 1
            same = len(scores) == len(want_scores)
            worst = max([worst, *(abs(a - b) for a, b in zip(scores, want_scores))]) if same else math.inf
    return ReplayCheck(bad == 0, len(lists), bad, worst)


def _pool_fit(prepared: Prepared) -> _Fitted:
    """Fit on the training sample's pools; measure both arms on every used request (each
    validation request and the training sample), so the report's groups are exactly those."""
    cfg = prepared.config
    check = pool_replay_check(prepared)
    if not check.exact:
        raise BaselineReplayMismatch(
            f"pool replay does not reproduce {check.mismatches} of {check.candidates} recorded returned lists "
            "(ids, order or scores); the recorded pools cannot support learning"
        )
    used = sorted(prepared.pools)
    everything = PoolSet([prepared.pools[i] for i in used])
    base_interactions = _base_interactions(everything)
    request_group, _ = _group_index(prepared)
    sample = prepared.fit_requests
    base = everything.judged_metrics(everything.rank(None, recorded=True), cfg.ndcg_k)

    def fitted(algorithm: str, rows: list[int] | None = None) -> tuple[Any, ...]:
        """The search of ``algorithm`` over the training sample (or its ``rows``: a fold's
        complement); the proposal's algorithm is shrunk toward the identity by inner folds of
        the same training groups (``shrunk_search``)."""
        rows = sample if rows is None else rows
        local_rows = {g: j for j, g in enumerate(sorted({int(request_group[i]) for i in rows}))}
        requests = [prepared.pools[i] for i in rows]
        fit_groups = np.array([local_rows[int(request_group[i])] for i in rows], dtype=np.int64)

        def objective_for(pools: PoolSet, pool_groups: np.ndarray) -> PoolObjective:
            return PoolObjective(
                pools,
                pool_groups,
                algorithm=algorithm,  # type: ignore[arg-type]
                k=cfg.ndcg_k,
                regularization=cfg.pool_regularization if algorithm == POOL_NDCG_ALGORITHM else cfg.regularization,
                margin_scale=cfg.margin_scale,
                base_interactions=base_interactions,
                ndcg_margin=cfg.ndcg_margin,
            )

        kw = dict(family=cfg.family, seed=cfg.seed, starts=cfg.search_starts, passes_per_step=cfg.passes_per_step)
        shrinkage, grid = None, cfg.shrinkage_grid if algorithm == _pool_algorithm(cfg) else None
        if grid is not None and len(grid) > 1:
            found, shrinkage = shrunk_search(
                requests,
                fit_groups,
                objective_for,
                grid=grid,
                folds=cfg.shrinkage_folds,  # type: ignore[arg-type]
                risk_aversion=cfg.shrinkage_risk_aversion,
                **kw,  # type: ignore[arg-type]
            )
        else:  # the alternative, or shrinkage off (a one-value grid is [1.0]: the search's own point)
            found = search(objective_for(PoolSet(requests), fit_groups), **kw)  # type: ignore[arg-type]
            shrinkage = None if grid is None else ShrinkageChoice(1.0, (), False)
        adjustment = found.parameters.adjustment()
        offset = 1.0 if algorithm == POOL_NDCG_ALGORITHM else 0.0  # losses: 1 − objective, or the pairwise loss
        return (
            adjustment,
            offset - found.value_at_identity,
            offset - found.value,
            everything.judged_metrics(everything.rank(adjustment), cfg.ndcg_k),
            found.evaluations,
            shrinkage,
        )

    # The two objectives and the cross-fitting folds are independent searches over read-only
    # pools: two threads (numpy releases the GIL in the array work), the same results as one
    # after the other.
    algorithms = (_pool_algorithm(cfg), _other(_pool_algorithm(cfg)))
    fold_of = _fold_of(prepared, request_group)
    complements = [[i for i in sample if fold_of(i) != k] for k in range(cfg.crossfit_folds or 0)]
    jobs = [_fit_pool().submit(fitted, a) for a in algorithms]
    fold_jobs = [_fit_pool().submit(fitted, algorithms[0], rows) for rows in complements]
    results = dict(zip(algorithms, (j.result() for j in jobs), strict=True))
    chosen, other = results[_pool_algorithm(cfg)], results[_other(_pool_algorithm(cfg))]
    folds = [(j.result()[0], j.result()[3]) for j in fold_jobs] if complements else None
    fold_shrinkage = [j.result()[5] for j in fold_jobs] if complements else None
    return _Fitted(
        multipliers=chosen[0],
        loss_before=chosen[1],
        loss_after=chosen[2],
        base=base,
        candidate=chosen[3],
        fit_requests=len(sample),
        search_evaluations=chosen[4],
        alternative=(_other(_pool_algorithm(cfg)), other[0], other[3], other[4]),
        measured=used,
        folds=folds,
        shrinkage=chosen[5],
        fold_shrinkage=fold_shrinkage,
    )


@functools.cache
def _fit_pool() -> ThreadPoolExecutor:
    """The two worker threads the pool fits (and their cross-fit folds) run on, started on first use."""
    return ThreadPoolExecutor(max_workers=2, thread_name_prefix="prme-pool-fit")


def _other(algorithm: str) -> str:
    return POOL_PAIRWISE_ALGORITHM if algorithm == POOL_NDCG_ALGORITHM else POOL_NDCG_ALGORITHM


def _base_interactions(pools: PoolSet) -> tuple[float, ...]:
    """The base configuration's interaction weights: the family-2 identity (one for all requests)."""
    found = {scoring.interaction_vector() for scoring, *_ in pools.contexts}
    if len(found) != 1:
        raise InvalidEvidence(
            f"the judged requests ran under {len(found)} different interaction weight settings; a family-2 "
            "proposal needs one base configuration — cut a snapshot of feedback collected under one"
        )
    return found.pop()


def _group_index(prepared: Prepared) -> tuple[np.ndarray, np.ndarray]:
    group_ids = sorted(prepared.groups)
    group_index = {g: i for i, g in enumerate(group_ids)}
    request_group = np.array([group_index[r.group] for r in prepared.requests], dtype=np.int64)
    validation_group = np.array([prepared.groups[g].validation for g in group_ids])
    return request_group, validation_group


def _group_results(
    prepared: Prepared,
    base: tuple[np.ndarray, np.ndarray],
    candidate: tuple[np.ndarray, np.ndarray],
    measured: list[int] | None = None,
) -> list[QueryLearningResult]:
    """Per group, the means over its measured requests (``measured``: which requests the metric
    arrays hold, in order; groups without a measured request are left out)."""
    (base_ndcg, base_pairs), (cand_ndcg, cand_pairs) = base, candidate
    position = {r: j for j, r in enumerate(measured if measured is not None else range(len(prepared.requests)))}
    queries = []
    for g in sorted(prepared.groups):
        info = prepared.groups[g]
        requests = [i for i in info.requests if i in position]
        if not requests:
            continue
        idx = [position[i] for i in requests]
        queries.append(
            QueryLearningResult(
                group_id=g,
                split="validation" if info.validation else "train",
                request_ids=tuple(sorted(prepared.requests[i].request_id for i in requests)),
                query_digests=tuple(sorted(info.query_digests)),
                baseline_pairwise_accuracy=float(np.mean(base_pairs[idx])),
                candidate_pairwise_accuracy=float(np.mean(cand_pairs[idx])),
                baseline_ndcg=float(np.mean(base_ndcg[idx])),
                candidate_ndcg=float(np.mean(cand_ndcg[idx])),
            )
        )
    return queries


def _validation_summary(
    queries: list[QueryLearningResult], cfg: LearningConfig
) -> tuple[np.ndarray, float, float, tuple[float, float]]:
    validation = [q for q in queries if q.split == "validation"]
    diffs = np.array([q.candidate_ndcg - q.baseline_ndcg for q in validation])
    pairwise = float(np.mean([q.candidate_pairwise_accuracy - q.baseline_pairwise_accuracy for q in validation]))
    interval = bootstrap_interval(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed)
    return diffs, float(diffs.mean()), pairwise, interval


def _crossfit_results(prepared: Prepared, fitted: _Fitted) -> list[CrossFitResult]:
    """Each training group judged by the fold proposal that never saw it (group means over the
    group's measured requests, as its training result)."""
    if fitted.folds is None:
        return []
    cfg = prepared.config
    by_fold = [
        {r.group_id: r for r in _group_results(prepared, fitted.base, metrics, fitted.measured)}
        for _, metrics in fitted.folds
    ]
    out = []
    for q in _group_results(prepared, fitted.base, fitted.candidate, fitted.measured):
        if q.split != "train":
            continue
        fold = crossfit_fold(q.group_id, seed=cfg.seed, folds=cfg.crossfit_folds)  # type: ignore[arg-type]
        row = by_fold[fold][q.group_id]
        out.append(
            CrossFitResult(
                **q.model_dump(include={"group_id", "request_ids", "baseline_pairwise_accuracy", "baseline_ndcg"}),
                fold=fold,
                candidate_pairwise_accuracy=row.candidate_pairwise_accuracy,
                candidate_ndcg=row.candidate_ndcg,
            )
        )
    return out


def _report(prepared: Prepared, common: dict[str, Any], fitted: _Fitted) -> LearningEvaluation:
    cfg = prepared.config
    queries = _group_results(prepared, fitted.base, fitted.candidate, fitted.measured)
    diffs, gain, pairwise_gain, interval = _validation_summary(queries, cfg)
    p_value = sign_flip_p_value(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed)
    crossfit = _crossfit_results(prepared, fitted)
    evidence, evidence_pairs = evidence_differences(queries, crossfit)
    summary = evidence_summary(evidence, evidence_pairs, cfg)
    decision = offline_gate(
        schema_version=REPORT_VERSION,
        config=cfg,
        ndcg_gain=summary["evidence_ndcg_gain"],
        interval_low=summary["evidence_gain_interval"][0],
        pairwise_gain=summary["evidence_pairwise_gain"],
        p_value=summary["evidence_sign_flip_p"],
        proposal_gain=gain,
        proposal_interval=interval,
    )
    estimate = groups_for_power(evidence, alpha=power_alpha(REPORT_VERSION, cfg))
    alternative = None
    if fitted.alternative is not None:
        algorithm, multipliers, metrics, evaluations = fitted.alternative
        _, alt_gain, alt_pairwise, alt_interval = _validation_summary(
            _group_results(prepared, fitted.base, metrics, fitted.measured), cfg
        )
        alternative = AlternativeFit(
            algorithm=algorithm,  # type: ignore[arg-type]
            multipliers=multipliers,
            validation_ndcg_gain=alt_gain,
            validation_pairwise_gain=alt_pairwise,
            validation_gain_interval=alt_interval,
            search_evaluations=evaluations,
        )
    return LearningEvaluation(
        **common,
        multipliers=fitted.multipliers,
        decision=decision,
        training_loss_before=fitted.loss_before,
        training_loss_after=fitted.loss_after,
        validation_ndcg_gain=gain,
        validation_pairwise_gain=pairwise_gain,
        validation_gain_interval=interval,
        queries=tuple(queries),
        fit_requests=fitted.fit_requests,
        search_evaluations=fitted.search_evaluations,
        observed_sd=estimate.sd if estimate.observed_groups >= 2 else None,
        groups_for_power=estimate.groups_for_power,
        alternative=alternative,
        sign_flip_p=p_value,
        crossfit=tuple(crossfit),
        crossfit_multipliers=tuple(m for m, _ in fitted.folds or ()),
        shrinkage=_shrinkage_record(fitted.shrinkage),
        crossfit_shrinkage=None
        if fitted.shrinkage is None
        else tuple(_shrinkage_record(c) for c in fitted.fold_shrinkage or ()),
        **summary,
    )


def _shrinkage_record(choice: ShrinkageChoice | None) -> ProposalShrinkage | None:
    if choice is None:
        return None
    return ProposalShrinkage(
        factor=choice.factor,
        inner_ndcg=choice.inner_ndcg,
        kept_identity=choice.kept_identity,
        inner_harm=choice.inner_harm or None,
    )


def evaluate_learning(
    snapshot: FeedbackSnapshot,
    *,
    owner: str,
    scopes: Any,
    surface: str = "results",
    config: LearningConfig | Mapping[str, Any] | None = None,
    query_groups: Mapping[Any, str] | None = None,
) -> LearningEvaluation:
    """Fit and judge a multiplier proposal for one owner and exact scope set (pure)."""
    cfg = None if config is None else parse_model(LearningConfig, config, "config")
    prepared = prepare(snapshot, owner=owner, scopes=scopes, surface=surface, config=cfg, query_groups=query_groups)
    return evaluate_prepared(prepared)
