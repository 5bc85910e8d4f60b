"""Offline proposal evaluation: fit multipliers on training groups, judge them on validation.

``evaluate_learning`` is pure and deterministic: the same snapshot, scope set, surface,
configuration and query groups give a byte-identical report. Validation labels never choose
weights or hyperparameters: the fit sees training pairs only, and validation metrics are
computed once, after the fit. Nothing here changes any active weight or profile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from prme_core.errors import BaselineReplayMismatch
from prme_core.features import WEIGHT_COUNT
from prme_core.gcpause import cyclic_gc_paused
from prme_core.learning.bootstrap import bootstrap_interval
from prme_core.learning.config import LearningConfig
from prme_core.learning.fit import PairwiseObjective, coordinate_search, judged_metrics, proposed_scores
from prme_core.learning.gates import offline_decision
from prme_core.learning.observations import Prepared, prepare
from prme_core.learning.proposal import (
    LearningCoverage,
    LearningEvaluation,
    QueryLearningResult,
    learning_input_checksum,
)
from prme_core.learning.snapshot import FeedbackSnapshot
from prme_core.retrieval.multipliers import UNITY, RankingMultipliers
from prme_core.validation import parse_model


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
    unity = np.ones(WEIGHT_COUNT)
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
    common: dict[str, Any] = dict(
        owner=prepared.owner,
        scopes=prepared.scopes,
        surface=prepared.surface,
        config=cfg,
        snapshot_sha256=prepared.snapshot_sha256,
        query_groups=prepared.query_groups,
        input_checksum=learning_input_checksum(
            owner=prepared.owner,
            scopes=prepared.scopes,
            surface=prepared.surface,
            snapshot_sha256=prepared.snapshot_sha256,
            query_groups=prepared.query_groups,
        ),
        feedback_ids=tuple(sorted(prepared.feedback_ids)),
        receipt_checksums=prepared.receipt_checksums,
        coverage=coverage_of(prepared),
        exclusions=prepared.exclusions,
    )
    if not coverage_sufficient(prepared):
        return LearningEvaluation(**common, multipliers=UNITY, decision="insufficient_data")
    check = baseline_replay_check(prepared)
    if not check.exact:
        raise BaselineReplayMismatch(
            f"baseline score replay mismatch on {check.mismatches} of {check.candidates} judged candidates "
            f"(largest difference {check.worst_difference:.3g}); the receipts cannot support learning"
        )

    group_ids = sorted(prepared.groups)
    group_index = {g: i for i, g in enumerate(group_ids)}
    request_group = np.array([group_index[r.group] for r in prepared.requests], dtype=np.int64)
    validation_group = np.array([prepared.groups[g].validation for g in group_ids])
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
    base_ndcg, base_pairs = judged_metrics(prepared.judged, prepared.judged.recorded, n_requests, cfg.ndcg_k)
    cand_ndcg, cand_pairs = judged_metrics(
        prepared.judged, proposed_scores(prepared.judged, multipliers), n_requests, cfg.ndcg_k
    )
    queries = []
    for g in group_ids:
        info = prepared.groups[g]
        idx = info.requests
        queries.append(
            QueryLearningResult(
                group_id=g,
                split="validation" if info.validation else "train",
                request_ids=tuple(sorted(prepared.requests[i].request_id for i in idx)),
                query_digests=tuple(sorted(info.query_digests)),
                baseline_pairwise_accuracy=float(np.mean(base_pairs[idx])),
                candidate_pairwise_accuracy=float(np.mean(cand_pairs[idx])),
                baseline_ndcg=float(np.mean(base_ndcg[idx])),
                candidate_ndcg=float(np.mean(cand_ndcg[idx])),
            )
        )
    validation = [q for q in queries if q.split == "validation"]
    diffs = np.array([q.candidate_ndcg - q.baseline_ndcg for q in validation])
    gain = float(diffs.mean())
    pairwise_gain = float(np.mean([q.candidate_pairwise_accuracy - q.baseline_pairwise_accuracy for q in validation]))
    interval = bootstrap_interval(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed)
    decision = offline_decision(
        enough_groups=True,
        ndcg_gain=gain,
        interval_low=interval[0],
        pairwise_gain=pairwise_gain,
        min_ndcg_gain=cfg.min_ndcg_gain,
    )
    return LearningEvaluation(
        **common,
        multipliers=RankingMultipliers.from_vector(multipliers),
        decision=decision,
        training_loss_before=loss_before,
        training_loss_after=loss_after,
        validation_ndcg_gain=gain,
        validation_pairwise_gain=pairwise_gain,
        validation_gain_interval=interval,
        queries=tuple(queries),
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
