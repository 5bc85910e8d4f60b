"""Candidate generation: lexical BM25, embedding similarity and graph proximity from seeds.

Each channel proposes a bounded top-k over the eligible nodes; the pool is their union in
corpus order, and graph expansion adds the direct (proximity 1 × edge weight) and two-hop
(0.5 × weights) neighbours of the strongest seeds. Every number here is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from prme_core.retrieval.corpus import Corpus

LEXICAL_TOP_K = 100
SEMANTIC_TOP_K = 100
GRAPH_SEEDS = 5
GRAPH_HOPS = 2
TWO_HOP_DECAY = 0.5


def generation_parameters() -> dict[str, int]:
    return {
        "lexical_top_k": LEXICAL_TOP_K,
        "semantic_top_k": SEMANTIC_TOP_K,
        "graph_seeds": GRAPH_SEEDS,
        "graph_hops": GRAPH_HOPS,
    }


@dataclass
class Pool:
    """The candidate pool: corpus rows with raw channel values and the paths that found them."""

    rows: list[int] = field(default_factory=list)
    bm25_values: list[float] = field(default_factory=list)
    semantic_values: list[float] = field(default_factory=list)
    graph_values: list[float] = field(default_factory=list)
    paths: list[set[str]] = field(default_factory=list)
    position: dict[int, int] = field(default_factory=dict)

    def add(self, row: int, path: str, bm25: float, semantic: float, graph: float = 0.0) -> int:
        at = self.position.get(row)
        if at is None:
            at = len(self.rows)
            self.rows.append(row)
            self.position[row] = at
            self.bm25_values.append(bm25)
            self.semantic_values.append(semantic)
            self.graph_values.append(graph)
            self.paths.append(set())
        elif graph > self.graph_values[at]:
            self.graph_values[at] = graph
        self.paths[at].add(path)
        return at

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(bm25, semantic, graph) as float64 arrays in pool order."""
        return (
            np.array(self.bm25_values, dtype=np.float64),
            np.array(self.semantic_values, dtype=np.float64),
            np.array(self.graph_values, dtype=np.float64),
        )


def _top_k(scores: np.ndarray, eligible: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest positive eligible scores, ties broken by corpus order."""
    candidates = np.flatnonzero(eligible & (scores > 0.0))
    if candidates.size > k:
        # Every score above the k-th highest, then the first of those equal to it in corpus
        # order (a partition, not a sort of the whole corpus); returned in corpus order.
        values = scores[candidates]
        kth = np.partition(values, candidates.size - k)[candidates.size - k]
        keep = values > kth
        keep[np.flatnonzero(values == kth)[: k - int(np.count_nonzero(keep))]] = True
        candidates = candidates[keep]
    return candidates


def generate_pool(
    corpus: Corpus, eligible: np.ndarray, *, query_tokens: list[str], query_vector: np.ndarray, mode: str
) -> Pool:
    """Channel candidates and graph neighbours of the best seeds, restricted to ``eligible``."""
    bm25_all = corpus.lexical.scores(query_tokens)
    semantic_all = np.maximum(corpus.vectors.cosine(query_vector), 0.0) if corpus.size else np.zeros(0)
    lexical_rows = _top_k(bm25_all, eligible, LEXICAL_TOP_K) if mode in ("hybrid", "lexical") else np.zeros(0, int)
    semantic_rows = (
        _top_k(semantic_all, eligible, SEMANTIC_TOP_K) if mode in ("hybrid", "semantic") else np.zeros(0, int)
    )
    rows = sorted(set(lexical_rows.tolist()) | set(semantic_rows.tolist()))
    lexical_set, semantic_set = set(lexical_rows.tolist()), set(semantic_rows.tolist())
    pool = Pool()
    for r in rows:
        at = pool.add(r, "lexical" if r in lexical_set else "semantic", float(bm25_all[r]), float(semantic_all[r]))
        if r in lexical_set and r in semantic_set:
            pool.paths[at].add("semantic")
    _expand_graph(corpus, pool, eligible, bm25_all, semantic_all)
    return pool


def _expand_graph(
    corpus: Corpus, pool: Pool, eligible: np.ndarray, bm25_all: np.ndarray, semantic_all: np.ndarray
) -> None:
    if not pool.rows or not corpus.neighbours:
        return
    bm25, semantic, _ = pool.arrays()
    top_bm25 = float(np.max(bm25))
    strength = (bm25 / top_bm25 if top_bm25 > 0 else np.zeros_like(bm25)) + semantic
    order = np.lexsort((np.array(pool.rows), -strength))
    seeds = [pool.rows[i] for i in order[:GRAPH_SEEDS] if strength[i] > 0.0]
    proximity: dict[int, float] = {}
    for seed in seeds:
        for neighbour, weight in corpus.neighbours.get(seed, ()):
            if neighbour != seed and eligible[neighbour]:
                proximity[neighbour] = max(proximity.get(neighbour, 0.0), weight)
                if GRAPH_HOPS >= 2:
                    for second, weight2 in corpus.neighbours.get(neighbour, ()):
                        if second != seed and eligible[second]:
                            proximity[second] = max(proximity.get(second, 0.0), TWO_HOP_DECAY * weight * weight2)
    for row in sorted(proximity):
        pool.add(row, "graph", float(bm25_all[row]), float(semantic_all[row]), proximity[row])
