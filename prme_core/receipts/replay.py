"""Score replay: recompute every score and the order from a receipt alone.

No model, graph, clock or classifier is consulted: the recorded trace features, applied weight
sets and ordered operations are enough, under the recorded formula version and sort policy.
Replay describes only returned candidates; candidate generation, filtering and packing of
unseen candidates cannot be recovered from a receipt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol
from uuid import UUID

import numpy as np

from prme_core.errors import ReplayMismatch, ReplayUnavailable
from prme_core.features import SCALAR_NAMES, FeatureLayout, layout_for
from prme_core.receipts.versions import PROVENANCE_SINCE
from prme_core.retrieval.formula import (
    SortPolicy,
    apply_adjustments,
    rank_fused_scores,
    sort_key,
    weighted_base_scores,
)

_SCALARS = attrgetter(*SCALAR_NAMES)
_FEATURES: dict[FeatureLayout, attrgetter] = {}


def _features_of(layout: FeatureLayout) -> attrgetter:
    """Reads a trace's formula-1 inputs in ``layout`` order (one getter per layout)."""
    getter = _FEATURES.get(layout)
    if getter is None:
        getter = _FEATURES[layout] = attrgetter(*layout.features)
    return getter


class Replayable(Protocol):
    """What replay reads from a receipt. ``receipts.model.RetrievalReceipt`` has it; the model
    imports this module to validate itself by replay, so this module does not import the model."""

    schema_version: int
    weight_sets: Sequence[Any]  # the applied ``ScoringWeights`` the candidates name by index
    ranking_policy: SortPolicy | None
    candidates: Sequence[Any]  # ``ReceiptCandidate``s: score, node id, reranker score, provenance


@dataclass(frozen=True)
class ReplayResult:
    """Replayed scores and candidate order (a plain value, cheap to build in bulk)."""

    scores: tuple[float, ...]
    order: tuple[UUID, ...]


def base_scores(receipt: Replayable) -> np.ndarray:
    """Replayed base scores (before recorded operations), one per candidate."""
    provs = [c.provenance for c in receipt.candidates]
    n = len(provs)
    out = np.zeros(n, dtype=np.float64)
    if n == 0:
        return out
    sets = receipt.weight_sets
    # Formula 1 in the layout the receipt's version records (what its scores were computed in).
    layout = layout_for(max(receipt.schema_version, 1))
    set_weights = np.array([layout.weight_vector(w) for w in sets], dtype=np.float64)
    set_scalars = np.array([_SCALARS(w) for w in sets], dtype=np.float64)
    w1 = [i for i, p in enumerate(provs) if p.formula_version == 1]  # type: ignore[union-attr]
    if w1:
        chosen = provs if len(w1) == n else [provs[i] for i in w1]
        getter = _features_of(layout)
        feats = np.array([getter(p.trace) for p in chosen], dtype=np.float64)  # type: ignore[union-attr]
        idx = np.array([p.weights for p in chosen], dtype=np.int64)  # type: ignore[union-attr]
        scores = weighted_base_scores(feats, set_weights[idx], set_scalars[idx], layout)
        if len(w1) == n:
            return scores
        out[w1] = scores
    w2 = [i for i, p in enumerate(provs) if p.formula_version == 2]  # type: ignore[union-attr]
    if w2:
        rf = [provs[i].rank_fusion for i in w2]  # type: ignore[union-attr]
        out[w2] = rank_fused_scores(
            np.array([r.semantic_rank or 0 for r in rf], dtype=np.float64),
            np.array([r.lexical_rank or 0 for r in rf], dtype=np.float64),
            np.array([(r.epistemic_factor, r.node_type_factor, r.temporal_factor) for r in rf], dtype=np.float64),
            np.array([sets[provs[i].weights].rrf_k for i in w2], dtype=np.float64),  # type: ignore[union-attr]
        )
    return out


def _require_provenance(receipt: Replayable) -> None:
    if receipt.schema_version < PROVENANCE_SINCE:
        raise ReplayUnavailable(
            "version 1 receipts lack replayable score provenance; they remain usable for feedback, "
            "but not for replay or fitting"
        )


def final_scores(receipt: Replayable, base: np.ndarray) -> list[float]:
    """Base scores with each candidate's recorded operations applied in order."""
    return [
        apply_adjustments(b, c.provenance.adjustments) if c.provenance.adjustments else b  # type: ignore[union-attr]
        for b, c in zip(base.tolist(), receipt.candidates)
    ]


def replay_scores(receipt: Replayable) -> list[float]:
    _require_provenance(receipt)
    return final_scores(receipt, base_scores(receipt))


def replay_order(receipt: Replayable, scores: list[float]) -> list[int]:
    """Candidate indices in the order the recorded sort policy gives for ``scores``."""
    policy = receipt.ranking_policy or "score_path_id"
    keys = [
        sort_key(
            policy,
            s,
            c.provenance.trace.path_score if c.provenance else 0.0,
            c.node_id.int,
            c.reranker_score is not None,
        )
        for s, c in zip(scores, receipt.candidates)
    ]
    return sorted(range(len(keys)), key=keys.__getitem__)


def replay(receipt: Replayable) -> ReplayResult:
    scores = replay_scores(receipt)
    order = replay_order(receipt, scores)
    return ReplayResult(
        scores=tuple(scores[i] for i in order), order=tuple(receipt.candidates[i].node_id for i in order)
    )


def check_replay(receipt: Replayable) -> None:
    """Raise ``ReplayMismatch`` unless base scores, final scores and order all reproduce exactly."""
    _require_provenance(receipt)
    base = base_scores(receipt)
    for b, c in zip(base.tolist(), receipt.candidates):
        if b != c.provenance.trace.base_score:  # type: ignore[union-attr]
            raise ReplayMismatch(
                f"candidate {c.node_id}: replayed base score {b!r} != recorded {c.provenance.trace.base_score!r}"
            )  # type: ignore[union-attr]
    scores = final_scores(receipt, base)
    for s, c in zip(scores, receipt.candidates):
        if s != c.score:
            raise ReplayMismatch(
                f"score provenance does not reproduce the returned score of {c.node_id}: {s!r} != {c.score!r}"
            )
    if replay_order(receipt, scores) != list(range(len(scores))):
        raise ReplayMismatch("score provenance does not reproduce the returned ranking order")
