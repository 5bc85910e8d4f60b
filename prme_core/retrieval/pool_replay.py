"""Pool replay: re-rank a version-10 receipt's recorded pool under other weights.

The recorded pool becomes a ``ranking.ScoredPool`` and goes through the same code retrieval
runs — query-specific redistribution, multipliers, formula 1, current-update, session
inheritance, ordering, ``min_score`` and the limit — so on a complete, replayable pool the result
equals a fresh ``retrieve(..., scoring=weights)`` over unchanged memory. No model, graph or
clock is consulted.

What may differ from the recorded request: the six weights, the interaction weights,
``temporal_boost``, ``relevance_floor``, ``current_update_multiplier`` and the multipliers.
``recency_lambda`` and ``node_type_boosts`` shape recorded features, so they must be the
recorded ones; rank fusion is not replayable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np

from prme_core.errors import ReplayMismatch, ReplayUnavailable
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.pool import PoolColumns
from prme_core.receipts.versions import POOL_SINCE
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.multipliers import RankingMultipliers, adjusted_weights
from prme_core.retrieval.ranking import ScoredPool, formula_scores, mask_paths, rank_pool
from prme_core.retrieval.scoring import redistribute
from prme_core.retrieval.session_context import Neighbour

_RECORDED = object()


@dataclass(frozen=True)
class PoolRanking:
    """The returned list a pool replay produces, in rank order."""

    node_ids: tuple[UUID, ...]
    scores: tuple[float, ...]
    applied: ScoringWeights  # the weight set formula 1 used (after redistribution and multipliers)


def recorded_multipliers(receipt: RetrievalReceipt) -> RankingMultipliers | None:
    """The multipliers the receipt's retrieval applied (explicit or from a profile), if any."""
    raw = receipt.execution.parameters.get("ranking_multipliers") if receipt.execution else None
    return None if raw is None else RankingMultipliers.model_validate(raw)


def scored_pool(columns: PoolColumns) -> ScoredPool:
    """A recorded pool as the arrays ``ranking.rank_pool`` reads (member keys are indices;
    outside neighbours follow the members)."""
    m = columns.members
    keys = [u.int for u in (*columns.node_ids, *columns.outside_ids)]
    cross_of = [*columns.cross_scope.tolist(), *columns.outside_cross_scope.tolist()]
    neighbour_lists = [
        [Neighbour(r, keys[r], cross_of[r]) for r in columns.neighbours_of(i).tolist()] for i in range(m)
    ]

    def neighbours(row: int) -> list[Neighbour]:
        return neighbour_lists[row] if columns.has_neighbours and row < m else []

    return ScoredPool(
        rows=list(range(m)),
        node_keys=keys[:m],
        features=columns.features,
        paths=[mask_paths(int(p)) for p in columns.paths],
        cross_scope=columns.cross_scope.tolist(),
        update_eligible=columns.update_eligible,
        neighbours=neighbours,
        layout=columns.layout,
    )


def replay_pool(
    receipt: RetrievalReceipt,
    *,
    weights: ScoringWeights | None = None,
    multipliers: Any = _RECORDED,
    allow_incomplete: bool = False,
) -> PoolRanking:
    """Re-rank the receipt's pool under ``weights`` (default: the recorded configured scoring) and
    ``multipliers`` (default: the recorded ones; ``None`` for none). Raises ``ReplayUnavailable``
    for receipts before version 10, pools marked not replayable, weights that change recorded
    features, and — unless ``allow_incomplete`` — truncated pools, whose re-ranking is not exact."""
    if receipt.schema_version < POOL_SINCE or receipt.pool is None:
        raise ReplayUnavailable(
            f"pool replay needs a version {POOL_SINCE} receipt with a recorded pool; "
            f"this is version {receipt.schema_version}"
        )
    pool = receipt.pool
    columns = receipt.pool_columns()
    if columns is None:
        raise ReplayUnavailable(
            f"receipt {receipt.request_id} was read without its packed pool; read it with its pool "
            "(MemoryClient.get_receipt(..., with_pool=True)) to replay it"
        )
    if not pool.replayable:
        raise ReplayUnavailable(
            f"this receipt's pool is not replayable ({pool.reason}): that step's inputs are not recorded"
        )
    if not pool.complete and not allow_incomplete:
        raise ReplayUnavailable(
            f"the pool holds {pool.size} candidates but records only {pool.depth}; re-ranking it "
            "is exact only for complete pools (pass allow_incomplete=True to rank what it holds)"
        )
    configured = receipt.scoring if weights is None else weights
    for name in ("recency_lambda", "node_type_boosts", "fusion"):
        if getattr(configured, name) != getattr(receipt.scoring, name):
            raise ReplayUnavailable(
                f"weights.{name} differs from the recorded {getattr(receipt.scoring, name)!r}; "
                "it shapes recorded features, so the pool cannot be re-ranked under it"
            )
    chosen = recorded_multipliers(receipt) if multipliers is _RECORDED else multipliers
    if chosen is not None and not isinstance(chosen, RankingMultipliers):
        chosen = RankingMultipliers.model_validate(chosen)
    shifted, _ = redistribute(configured, current=pool.current_state, episodic=pool.episodic)
    applied = adjusted_weights(shifted, chosen)
    scored = scored_pool(columns)
    base = formula_scores(scored, applied) if scored.size else np.zeros(0)
    packing = receipt.packing
    ranking = rank_pool(
        scored,
        base,
        applied,
        session_top_k=packing.session_context_top_k,
        session_decay=packing.session_context_score_decay,
        min_score=receipt.min_score,
        limit=receipt.result_limit,
    )
    ids = [*columns.node_ids, *columns.outside_ids]
    return PoolRanking(
        node_ids=tuple(ids[r.row] for r in ranking.kept), scores=tuple(r.score for r in ranking.kept), applied=applied
    )


def check_pool_replay(receipt: RetrievalReceipt) -> bool:
    """Raise ``ReplayMismatch`` unless replaying a complete, replayable pool under the recorded
    weights reproduces the returned ids, scores and applied weight set; False when the receipt
    has no such pool (nothing to check), True when it was checked."""
    pool = receipt.pool
    if pool is None or not pool.replayable or not pool.complete or receipt.pool_columns() is None:
        return False
    result = replay_pool(receipt)
    recorded = (tuple(c.node_id for c in receipt.candidates), tuple(c.score for c in receipt.candidates))
    if (result.node_ids, result.scores) != recorded:
        raise ReplayMismatch(f"pool replay of receipt {receipt.request_id} does not reproduce its returned list")
    if receipt.weight_sets and result.applied != receipt.weight_sets[0]:
        raise ReplayMismatch(f"pool replay of receipt {receipt.request_id} applies other weights than it recorded")
    return True
