"""Why the offline gate decides as it does on one LoCoMo owner: label density, feature spread,
session-inherited candidates, the fit against NDCG, per-query and per-category results, and a
few exploratory refits.

Everything is computed from the learner's own prepared observations (the judged candidates of the
feedback snapshot) with the learner's own scoring, metrics and bootstrap. The exploratory refits
look at validation labels, so they are for understanding only: none of them is gated, and acting
on them would spend the validation split (a real change must be judged on fresh feedback and a
fresh holdout).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from prme_core.features import TRACE_FEATURES, WEIGHT_NAMES
from prme_core.learning.bootstrap import bootstrap_interval
from prme_core.learning.config import LearningConfig
from prme_core.learning.fit import judged_metrics, proposed_scores
from prme_core.learning.observations import Prepared, prepare
from prme_core.learning.offline import evaluate_prepared
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.snapshot import FeedbackSnapshot

FEATURES = TRACE_FEATURES
EXPLORATORY_MARGINS = (20.0, 50.0, 100.0)


def _inherited_rows(prepared: Prepared, snapshot: FeedbackSnapshot) -> np.ndarray:
    """Per judged row: was its provenance inherited from another node (session/episode)?"""
    flags = []
    for request in prepared.requests:
        evidence = snapshot.receipts[request.request_id]
        nodes = evidence.node_ids()
        bases = evidence.projection.base_node_ids.split("\x1f")
        flags.extend(nodes[r] != bases[r] for r in request.positives + request.negatives)
    return np.array(flags, dtype=bool)


def _per_request(prepared: Prepared, multipliers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    j, n, k = prepared.judged, len(prepared.requests), prepared.config.ndcg_k
    base_ndcg, base_acc = judged_metrics(j, j.recorded, n, k)
    cand_ndcg, cand_acc = judged_metrics(j, proposed_scores(j, multipliers), n, k)
    return base_ndcg, cand_ndcg, base_acc, cand_acc


def _group_means(prepared: Prepared, values: np.ndarray, validation: bool) -> dict[str, float]:
    return {
        g: float(np.mean(values[info.requests]))
        for g, info in sorted(prepared.groups.items())
        if info.validation == validation
    }


def effect_on(prepared: Prepared, multipliers: np.ndarray) -> dict[str, Any]:
    """Train and validation judged NDCG gains of ``multipliers`` on ``prepared`` (group means),
    with the gate's bootstrap interval on validation."""
    base, cand, base_acc, cand_acc = _per_request(prepared, multipliers)
    out: dict[str, Any] = {}
    for split, validation in (("train", False), ("validation", True)):
        b, c = _group_means(prepared, base, validation), _group_means(prepared, cand, validation)
        ba, ca = _group_means(prepared, base_acc, validation), _group_means(prepared, cand_acc, validation)
        diffs = np.array([c[g] - b[g] for g in b])
        out[split] = {
            "groups": len(b),
            "unchanged_groups": int(np.sum(np.abs(diffs) <= 1e-12)),
            "per_group_gain_sd": float(diffs.std(ddof=1)) if diffs.size > 1 else None,
            "baseline_ndcg": float(np.mean(list(b.values()))) if b else None,
            "candidate_ndcg": float(np.mean(list(c.values()))) if c else None,
            "ndcg_gain": float(diffs.mean()) if diffs.size else None,
            "pairwise_accuracy_gain": float(np.mean([ca[g] - ba[g] for g in ba])) if ba else None,
            "improved_groups": int(np.sum(diffs > 1e-12)),
            "regressed_groups": int(np.sum(diffs < -1e-12)),
        }
        if validation and diffs.size:
            cfg = prepared.config
            out[split]["interval"] = bootstrap_interval(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed)
    return out


def _without_inherited_labels(snapshot: FeedbackSnapshot) -> FeedbackSnapshot:
    """The snapshot with labels on inherited candidates removed (unlabelled, never negative)."""
    records = []
    for record in snapshot.records:
        evidence = snapshot.receipts[record.request_id]
        nodes = evidence.node_ids()
        bases = evidence.projection.base_node_ids.split("\x1f")
        inherited = {n for n, b in zip(nodes, bases) if n != b}
        records.append(
            dataclasses.replace(record, labels={n: v for n, v in record.labels.items() if n not in inherited})
        )
    return dataclasses.replace(snapshot, records=tuple(records))


def diagnose(
    snapshot: FeedbackSnapshot,
    proposal: LearningEvaluation,
    *,
    owner: str,
    scopes: list[str],
    config: LearningConfig,
    group_category: Mapping[str, int],
    evidence_per_question: float,
) -> dict[str, Any]:
    # The diagnosis is of the judged-candidate (version-1) fit: what that gate sees.
    config = config.model_copy(update={"fit": "judged_pairwise"})
    prepared = prepare(snapshot, owner=owner, scopes=scopes, config=config)
    j = prepared.judged
    if not prepared.requests:
        return {"status": "no requests with explicit pairs"}
    if proposal.fit_path != "judged":
        proposal = evaluate_prepared(prepared)
    inherited = _inherited_rows(prepared, snapshot)
    positives = j.positive
    n_requests = len(prepared.requests)
    pos_per_request = np.bincount(j.request, positives.astype(float), minlength=n_requests)
    judged_per_request = np.bincount(j.request, minlength=n_requests)
    density = {
        "feedback_records": len(prepared.feedback_ids),
        "requests_with_pairs": n_requests,
        "requests_without_returned_evidence": prepared.exclusions.get("requests_without_explicit_pairs", 0),
        "judged_candidates_per_request": float(judged_per_request.mean()),
        "positives_per_request_mean": float(pos_per_request.mean()),
        "positives_per_request_median": float(np.median(pos_per_request)),
        "requests_with_one_positive": int(np.sum(pos_per_request == 1)),
        "positive_share_of_judged": float(positives.mean()),
        "evidence_turns_per_question": evidence_per_question,
        "explicit_pairs": prepared.explicit_pairs,
    }
    spread = {
        name: {
            "std": float(j.features[:, i].std()),
            "mean_positive": float(j.features[positives, i].mean()),
            "mean_negative": float(j.features[~positives, i].mean()),
        }
        for i, name in enumerate(FEATURES)
    }
    constant = [name for name in WEIGHT_NAMES if spread[name]["std"] < 1e-9]
    same = np.all(j.features[j.pair_positive] == j.features[j.pair_negative], axis=1)
    ahead = j.recorded[j.pair_positive] > j.recorded[j.pair_negative]
    inheritance = {
        "judged_inherited_share": float(inherited.mean()),
        "positives_inherited": int(np.sum(inherited & positives)),
        "positives": int(positives.sum()),
        "negatives_inherited": int(np.sum(inherited & ~positives)),
        "negatives": int((~positives).sum()),
        "pairs_with_an_inherited_member": int(np.sum(inherited[j.pair_positive] | inherited[j.pair_negative])),
        "pairs_with_identical_features": int(same.sum()),
        "pairs_with_identical_features_positive_behind": int(np.sum(same & ~ahead)),
        "pairs": int(j.pair_positive.size),
    }
    z = prepared.config.margin_scale * (j.recorded[j.pair_negative] - j.recorded[j.pair_positive])
    surrogate = {
        "margin_scale": prepared.config.margin_scale,
        "mean_abs_z_at_unity": float(np.abs(z).mean()),
        "pairs_with_abs_z_below_1": float(np.mean(np.abs(z) < 1.0)),
    }
    multipliers = np.array(proposal.multipliers.vector())
    fitted = proposal.decision != "insufficient_data"
    base, cand, _, _ = _per_request(prepared, multipliers)
    kinds = []
    for i in range(n_requests):
        rows = (j.request == i) & positives
        share = inherited[rows].mean()
        kinds.append("all inherited" if share == 1 else ("none inherited" if share == 0 else "mixed"))
    kinds_arr = np.array(kinds)
    validation = np.array([r.validation for r in prepared.requests])
    by_positive_provenance = {
        kind: {
            "requests": int(np.sum(mask)),
            "baseline_ndcg": float(base[mask].mean()),
            "candidate_ndcg": float(cand[mask].mean()),
        }
        for kind in ("none inherited", "mixed", "all inherited")
        for mask in [validation & (kinds_arr == kind)]
        if mask.any()
    }
    by_category: dict[str, dict[str, Any]] = {}
    for q in proposal.queries:
        if q.split != "validation":
            continue
        cat = str(group_category.get(q.group_id, 0))
        entry = by_category.setdefault(cat, {"groups": 0, "gain_sum": 0.0, "regressed": 0, "improved": 0})
        d = q.candidate_ndcg - q.baseline_ndcg
        entry["groups"] += 1
        entry["gain_sum"] += d
        entry["regressed"] += d < -1e-12
        entry["improved"] += d > 1e-12
    for entry in by_category.values():
        entry["mean_gain"] = entry.pop("gain_sum") / entry["groups"]
    worst = sorted(
        (q for q in proposal.queries if q.split == "validation"), key=lambda q: q.candidate_ndcg - q.baseline_ndcg
    )[:5]
    request_index = {r.request_id: i for i, r in enumerate(prepared.requests)}
    worst_rows = []
    for q in worst:
        idx = [request_index[str(r)] for r in q.request_ids]
        rows = np.isin(j.request, idx)
        worst_rows.append(
            {
                "group": q.group_id[:12],
                "category": group_category.get(q.group_id, 0),
                "baseline_ndcg": q.baseline_ndcg,
                "candidate_ndcg": q.candidate_ndcg,
                "positives": int(np.sum(rows & positives)),
                "inherited_positives": int(np.sum(rows & positives & inherited)),
            }
        )
    out: dict[str, Any] = {
        "status": "fitted" if fitted else "not fitted (insufficient coverage)",
        "label_density": density,
        "feature_spread": spread,
        "constant_weight_features": constant,
        "session_inheritance": inheritance,
        "surrogate": surrogate,
        "fit": {
            "multipliers": proposal.multipliers.model_dump(),
            "training_loss_before": proposal.training_loss_before,
            "training_loss_after": proposal.training_loss_after,
            **effect_on(prepared, multipliers),
        },
        "validation_by_positive_provenance": by_positive_provenance,
        "validation_by_category": dict(sorted(by_category.items())),
        "worst_validation_groups": worst_rows,
    }
    out["exploratory_refits"] = _refits(snapshot, prepared, owner=owner, scopes=scopes, config=config)
    return out


def _refits(
    snapshot: FeedbackSnapshot, prepared: Prepared, *, owner: str, scopes: list[str], config: LearningConfig
) -> list[dict[str, Any]]:
    """Refit variants judged on the unchanged prepared observations (NOT gated; see module doc)."""
    relaxed = config.model_copy(update={"min_training_queries": 2, "min_validation_queries": 2})
    variants: list[tuple[str, FeedbackSnapshot, LearningConfig]] = [
        (f"margin_scale {m:g}", snapshot, relaxed.model_copy(update={"margin_scale": m})) for m in EXPLORATORY_MARGINS
    ]
    stripped = _without_inherited_labels(snapshot)
    variants.append(("no labels on inherited candidates", stripped, relaxed))
    variants.append(
        (
            "no labels on inherited candidates, margin_scale 50",
            stripped,
            relaxed.model_copy(update={"margin_scale": 50.0}),
        )
    )
    rows = []
    for name, snap, cfg in variants:
        variant = prepare(snap, owner=owner, scopes=scopes, config=cfg)
        if not variant.requests:
            continue
        refit = evaluate_prepared(variant)
        m = np.array(refit.multipliers.vector())
        effect = effect_on(prepared, m)
        rows.append(
            {
                "variant": name,
                "multipliers": dict(zip(WEIGHT_NAMES, map(float, m))),
                "train_ndcg_gain": effect["train"]["ndcg_gain"],
                "validation_ndcg_gain": effect["validation"]["ndcg_gain"],
                "validation_interval": effect["validation"].get("interval"),
                "validation_pairwise_gain": effect["validation"]["pairwise_accuracy_gain"],
            }
        )
    return rows
