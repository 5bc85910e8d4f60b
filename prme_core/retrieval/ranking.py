"""Ranking a scored pool: formula-1 base scores, post-score operations and the final order.

One implementation for two sources of the same arrays: the pipeline builds a ``ScoredPool`` from
a live corpus, and pool replay (``retrieval.pool_replay``) builds one from a version-10 receipt's
recorded pool. Both then run ``formula_scores`` and ``rank_pool``, so a pool re-ranked under
other weights is what a fresh retrieval under those weights returns (when the pool is complete).

Order of operations in ``rank_pool``: current-update coefficients, the base order (score, path
score, id), an optional reranker blend and episode routing (live only; their inputs are not
recorded), session inheritance, re-sort by (score, id) if anything moved, ``min_score``, limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from prme_core.features import CURRENT_LAYOUT, FeatureLayout
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.formula import SortPolicy, weighted_base_scores
from prme_core.retrieval.ranked import Op, Ranked, ordered
from prme_core.retrieval.scoring import current_update_coefficients
from prme_core.retrieval.session_context import NeighbourSource, expand_sessions

PATH_BITS: dict[str, int] = {"lexical": 1, "semantic": 2, "graph": 4}
"""Generation paths of a pool member as recorded in a receipt's pool (a bit mask)."""


def path_score(paths: Iterable[str] | set[str]) -> float:
    """The ordering value of a member's generation paths: one third per path, at most 1."""
    return min(len(set(paths)) / 3.0, 1.0)


def path_mask(paths: Iterable[str]) -> int:
    return sum(PATH_BITS[p] for p in set(paths))


def mask_paths(mask: int) -> set[str]:
    return {name for name, bit in PATH_BITS.items() if mask & bit}


@dataclass
class ScoredPool:
    """The arrays ranking reads, one entry per pool member.

    ``rows`` are opaque member keys (corpus rows for a live pool, member indices for a replayed
    one); neighbours returned by ``neighbours`` use the same keys. ``layout`` is the feature
    layout of ``features`` (the pipeline computes the current one; a replayed pool carries its
    record's).
    """

    rows: Sequence[int]
    node_keys: Sequence[int]  # node UUIDs as integers (the final tie-break)
    features: np.ndarray  # (n, layout.width), ``layout.features`` order
    paths: Sequence[set[str]]
    cross_scope: Sequence[bool]
    update_eligible: np.ndarray  # current-state query, newest memory time, update language
    neighbours: NeighbourSource
    layout: FeatureLayout = field(default=CURRENT_LAYOUT)

    @property
    def size(self) -> int:
        return len(self.rows)


@dataclass
class Ranking:
    """All ranked candidates in final order, the returned prefix, the sort policy, and the pool
    positions in base order (before reranking and context expansion)."""

    items: list[Ranked]
    kept: list[Ranked]
    policy: SortPolicy
    base_order: list[int]


Rerank = Callable[[list[Ranked]], list[Ranked] | None]  # reordered items, or None if not applied
Route = Callable[[list[Ranked]], bool]  # True when the ranking changed


def formula_scores(pool: ScoredPool, weights: ScoringWeights) -> np.ndarray:
    """Formula-1 base scores of every member under the applied ``weights``."""
    n = pool.size
    return weighted_base_scores(
        pool.features,
        np.tile(np.array(pool.layout.weight_vector(weights), dtype=np.float64), (n, 1)),
        np.tile(np.array([weights.temporal_boost, weights.relevance_floor]), (n, 1)),
        pool.layout,
    )


def rank_pool(
    pool: ScoredPool,
    base: np.ndarray,
    weights: ScoringWeights,
    *,
    session_top_k: int,
    session_decay: float,
    min_score: float,
    limit: int,
    rerank: Rerank | None = None,
    route: Route | None = None,
) -> Ranking:
    f, layout = pool.features, pool.layout
    relevance = f[:, layout.index("semantic")] + f[:, layout.index("lexical")] if pool.size else np.zeros(0)
    coefficients = current_update_coefficients(base, relevance, pool.update_eligible, weights)
    items: list[Ranked] = []
    for i in range(pool.size):
        ops = (Op("current_update", float(coefficients[i])),) if coefficients[i] != 1.0 else ()
        paths = set(pool.paths[i])
        items.append(
            Ranked(
                row=pool.rows[i],
                source=i,
                base=float(base[i]),
                ops=ops,
                paths=paths,
                cross_scope=bool(pool.cross_scope[i]),
                node_key=pool.node_keys[i],
                path_score=path_score(paths),
            )
        )
    items = ordered(items, "score_path_id")
    base_order = [r.source for r in items]
    policy: SortPolicy = "score_path_id"
    if rerank is not None and items:
        reranked = rerank(items)
        if reranked is not None:
            items, policy = reranked, "reranked_prefix"
    changed = route(items) if route is not None else False
    changed |= expand_sessions(items, pool.neighbours, top_k=session_top_k, decay=session_decay)
    if changed:
        policy = "score_id"
        items = ordered(items, "score_id")
    kept = [r for r in items if r.score >= min_score][:limit]
    return Ranking(items=items, kept=kept, policy=policy, base_order=base_order)
