"""The retrieval pipeline: validate, generate, score, expand, select, pack, record a receipt.

Order of work for one request (every step deterministic):

1. validate every argument (``RetrievalRequest``) before any work;
2. resolve request-local multipliers (explicit ones win; otherwise the scoped profile pointer);
3. generate candidates (BM25, embeddings, graph) over the owner's eligible nodes;
4. compute features, apply query-specific recency redistribution, then the multipliers, and
   score with formula 1 (weighted sum) or formula 2 (rank fusion);
5. post-score operations: current-update, optional reranker blend, episode routing, session
   inheritance — each recorded, so ``replay_ranking()`` reproduces scores and order;
6. apply ``min_score`` and the limit, pack the context within the token budget;
7. record the current-version receipt (append-only operation + projection, one transaction); if
   that fails the retrieval still returns with ``metadata.receipt_persisted = False``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import numpy as np

from prme_core.features import EPISTEMIC_INDEX, INTERACTION_NAMES, TRACE_FEATURES
from prme_core.receipts.store import persist_receipt
from prme_core.retrieval import candidates as generation
from prme_core.retrieval.bm25 import Bm25Parameters
from prme_core.retrieval.bundling import PACK_ITEMS, pack_run
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.corpus import Corpus, CorpusCache, lexical_identity
from prme_core.retrieval.embedding import EmbeddingProvider
from prme_core.retrieval.execution import execution_features, feature_identity_sha256
from prme_core.retrieval.formula import SortPolicy, rank_fused_scores
from prme_core.retrieval.interaction import QueryTerms, interaction_features
from prme_core.retrieval.multipliers import adjusted_weights
from prme_core.retrieval.packing import ContextEntry
from prme_core.retrieval.query_analysis import QueryAnalysis, analyze_query, temporal_affinity
from prme_core.retrieval.ranked import Op, Ranked, ordered
from prme_core.retrieval.ranking import ScoredPool, formula_scores, path_score, rank_pool
from prme_core.retrieval.receipt_assembly import assemble_receipt
from prme_core.retrieval.requests import (
    EPISTEMIC_MODES,
    ProfileResolution,
    RetrievalMetadata,
    RetrievalRequest,
    RetrievalResponse,
    RetrievedMemory,
)
from prme_core.retrieval.reranker import Reranker, RerankerSettings, reranker_identity
from prme_core.retrieval.scoring import (
    competition_ranks,
    pool_relative,
    recency_factors,
    redistribute,
)
from prme_core.retrieval.session_context import corpus_neighbours, route_episodes
from prme_core.retrieval.text import lexical_tokens
from prme_core.retrieval.tokenizer import tokenizer_identity
from prme_core.storage.base import Store
from prme_core.types import (
    to_epoch_us,
)

log = logging.getLogger(__name__)

ProfileResolver = Callable[[str, tuple[str, ...], ScoringWeights, str], tuple[ProfileResolution, int | None]]
"""(owner, scopes, base scoring, feature identity) → the resolution and, when the resolver read it
in the same statement as the pointer, the owner's memory revision (None: the corpus cache reads
it); ``profiles.resolution.PointerResolver.resolve``."""


def _no_profiles(
    owner: str, scopes: tuple[str, ...], scoring: ScoringWeights, features_sha: str
) -> tuple[ProfileResolution, int | None]:
    return ProfileResolution("none"), None


class RetrievalPipeline:
    """Retrieval over one store; holds the corpus cache and the observed feature identity."""

    def __init__(
        self,
        store: Store,
        *,
        embedder: EmbeddingProvider,
        reranker: Reranker | None = None,
        reranker_settings: RerankerSettings | None = None,
        profile_resolver: ProfileResolver | None = None,
        bm25: Bm25Parameters | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.reranker_settings = reranker_settings or RerankerSettings()
        self.resolve_profile: ProfileResolver = profile_resolver or _no_profiles
        self.corpora = CorpusCache(store, embedder, bm25=bm25)
        self.features = execution_features(
            backend=store.backend,
            storage_class=type(store).__name__,
            embedding=embedder.identity(),
            lexical=lexical_identity(self.corpora.bm25),
            tokenizer=tokenizer_identity(),
        )
        self.features_sha256 = feature_identity_sha256(self.features)

    def features_for_request(self) -> dict[str, Any]:
        """Observed features plus the reranker identity, which is read on every request."""
        return {**self.features, "reranker": reranker_identity(self.reranker)}

    def retrieve(self, request: RetrievalRequest) -> RetrievalResponse:
        started = time.perf_counter()
        request_id = uuid4()
        features = self.features_for_request()
        revision = None
        if request.ranking_multipliers is not None:
            resolution = ProfileResolution(
                "request_override", request.ranking_multipliers, None, "explicit_multipliers"
            )
        else:
            resolution, revision = self.resolve_profile(
                request.owner, request.scopes, request.scoring, feature_identity_sha256(features)
            )
        corpus = self.corpora.get(request.owner, revision)
        run = Run(self, request, corpus, resolution)
        ranked = run.rank()
        bundle = pack_run(run, ranked)
        receipt = assemble_receipt(run, request_id, ranked, bundle, features)
        persisted, checksum, error = True, None, None
        try:
            checksum = persist_receipt(self.store, receipt).checksum
        except Exception as exc:  # noqa: BLE001 - retrieval must survive any logging failure
            persisted, error = False, f"{type(exc).__name__}: {exc}"
            log.warning("retrieval %s: receipt not persisted: %s", request_id, error)
        entries = {e.node_id: e for e in bundle.entries}
        results = tuple(run.result(i, r, entries) for i, r in enumerate(ranked))
        meta = RetrievalMetadata(
            request_id=request_id,
            receipt_persisted=persisted,
            receipt_checksum=checksum,
            receipt_error=error,
            schema_version=receipt.schema_version,
            ranking_policy=receipt.ranking_policy or "",
            ranking_multipliers=None if run.multipliers is None else run.multipliers.model_dump(),
            ranking_profile_id=resolution.profile_id,
            ranking_profile_status=resolution.status,
            ranking_profile_reason=resolution.reason,
            candidate_pool_size=len(run.pool_rows),
            context_tokens=bundle.tokens_used,
            context_sha256=receipt.context_sha256,
            duration_ms=(time.perf_counter() - started) * 1000.0,
        )
        return RetrievalResponse(results=results, bundle=bundle, receipt=receipt, metadata=meta)


def _node_keys(corpus: Corpus) -> list[int]:
    """Every node's UUID as an integer (ranking's final tie-break), made once per corpus."""
    keys = corpus.extras.get("node_keys")
    if keys is None:
        keys = corpus.extras["node_keys"] = [u.int for u in corpus.uuids]
    return keys


class Run:
    """The state of one retrieval while it is ranked, packed and recorded."""

    def __init__(
        self, pipeline: RetrievalPipeline, request: RetrievalRequest, corpus: Corpus, resolution: ProfileResolution
    ) -> None:
        self.p = pipeline
        self.req = request
        self.corpus = corpus
        self.resolution = resolution
        self.multipliers = resolution.multipliers if resolution.status in ("applied", "request_override") else None
        self.analysis: QueryAnalysis = analyze_query(request.query, request.reference_time)
        self.policy: SortPolicy = "score_path_id"
        self.pool_rows: list[int] = []
        self.base_order: list[int] = []
        self.current_state = False
        self.episodic = False  # whether episodic recency redistribution was applied
        self.query_terms = QueryTerms(request.query)

    # --- ranking ------------------------------------------------------------------------

    def eligible(self) -> tuple[np.ndarray, np.ndarray]:
        c, req = self.corpus, self.req
        in_scope = c.scope_mask(req.scopes)
        mask = np.ones(c.size, dtype=bool) if req.include_cross_scope else in_scope.copy()
        if req.time_from is not None:
            mask &= np.isnan(c.valid_to_us) | (c.valid_to_us > to_epoch_us(req.time_from))
        if req.time_to is not None:
            mask &= np.isnan(c.valid_from_us) | (c.valid_from_us <= to_epoch_us(req.time_to))
        if req.event_time_from is not None:
            mask &= ~np.isnan(c.event_us) & (c.event_us >= to_epoch_us(req.event_time_from))
        if req.event_time_to is not None:
            mask &= ~np.isnan(c.event_us) & (c.event_us <= to_epoch_us(req.event_time_to))
        allowed = EPISTEMIC_MODES[req.epistemic_mode]
        if allowed is not None:
            mask &= c.epistemic_mask(allowed)
        return mask, mask & ~in_scope

    def rank(self) -> list[Ranked]:
        c, req, a = self.corpus, self.req, self.analysis
        eligible, cross = self.eligible()
        self.eligible_mask, self.cross_mask = eligible, cross
        query_tokens = lexical_tokens(req.query)
        pool = generation.generate_pool(
            c,
            eligible,
            query_tokens=query_tokens,
            query_vector=self.p.embedder.embed_query(req.query),
            mode=req.retrieval_mode,
        )
        self.pool_rows = pool.rows
        self.pool = pool
        rows = np.array(pool.rows, dtype=np.int64)
        bm25, semantic, graph = pool.arrays()
        self.pool_bm25 = bm25
        n = rows.size
        if n == 0:
            self.applied = adjusted_weights(req.scoring, self.multipliers)
            self.redistribution = redistribute(req.scoring, current=False, episodic=False)[1]
            return []
        top_bm25 = float(np.max(bm25))
        lexical = bm25 / top_bm25 if top_bm25 > 0.0 else np.zeros(n)
        updating = c.updating[rows]
        current = a.is_current(bool(updating.any()))
        self.episodic = a.episodic and not current
        shifted, self.redistribution = redistribute(req.scoring, current=current, episodic=self.episodic)
        self.applied = adjusted_weights(shifted, self.multipliers)
        w = self.applied
        memory_us = c.memory_us()[rows]
        recency = recency_factors(
            stamp_us=c.updated_us[rows],
            memory_us=memory_us,
            updating=updating,
            reference_us=to_epoch_us(req.reference_time),
            recency_lambda=w.recency_lambda,
            current=current,
        )
        if a.intent == "temporal":
            affinity = temporal_affinity(
                c.dated[rows],
                c.stated_us()[rows].astype(np.int64),
                to_epoch_us(a.window_start),
                to_epoch_us(a.window_end),
            )
        else:
            affinity = np.zeros(n)
        types = [c.node_type[r] for r in pool.rows]
        boost_of = {t: w.boost(t) for t in set(types)}  # looked up once per node type
        boosts = np.array([boost_of[t] for t in types], dtype=np.float64)
        interactions = interaction_features(self.query_terms, c, pool.rows)
        computed = {
            "semantic": semantic,
            "lexical": lexical,
            "graph": graph,
            "recency": recency,
            "salience": c.salience[rows],
            "confidence": c.confidence[rows],
            "epistemic_weight": c.epistemic[rows],
            "temporal_affinity": affinity,
            "node_type_boost": boosts,
            **{name: interactions[:, j] for j, name in enumerate(INTERACTION_NAMES)},
        }
        self.features = np.column_stack([computed[name] for name in TRACE_FEATURES])  # in layout order
        self.path_scores = np.array([path_score(p) for p in pool.paths], dtype=np.float64)
        newest = memory_us == np.max(memory_us)
        self.current_state = current
        self.scored = ScoredPool(
            rows=pool.rows,
            node_keys=list(map(_node_keys(c).__getitem__, pool.rows)),
            features=self.features,
            paths=pool.paths,
            cross_scope=cross[rows].tolist(),
            update_eligible=current & newest & updating,
            neighbours=corpus_neighbours(c, eligible, cross, req.packing.session_context_window),
        )
        if w.fusion == "weighted":
            base = formula_scores(self.scored, w)
            self.fusion = None
        else:
            base = self._rank_fusion(pool, semantic, lexical, affinity, boosts, w)
        self.base = base
        pack_cfg = req.packing
        route = None
        if pack_cfg.episode_context_top_k > 0:

            def route(items: list[Ranked]) -> bool:
                return route_episodes(
                    items,
                    c,
                    eligible,
                    cross,
                    query_tokens,
                    top_k=pack_cfg.episode_context_top_k,
                    local_k=pack_cfg.episode_context_local_k,
                    decay=pack_cfg.episode_context_score_decay,
                )

        ranking = rank_pool(
            self.scored,
            base,
            w,
            session_top_k=pack_cfg.session_context_top_k,
            session_decay=pack_cfg.session_context_score_decay,
            min_score=req.min_score,
            limit=req.limit,
            rerank=self._rerank if self.p.reranker is not None else None,
            route=route,
        )
        self.policy = ranking.policy
        self.base_order = ranking.base_order
        return ranking.kept

    def _rank_fusion(
        self,
        pool: Any,
        semantic: np.ndarray,
        lexical: np.ndarray,
        affinity: np.ndarray,
        boosts: np.ndarray,
        w: ScoringWeights,
    ) -> np.ndarray:
        on_sem = np.array(["semantic" in p for p in pool.paths]) | (semantic > 0.0)
        on_lex = np.array(["lexical" in p for p in pool.paths]) | (self.pool_bm25 > 0.0)
        on_any = on_sem | on_lex
        sem_rank = competition_ranks(semantic, on_sem)
        lex_rank = competition_ranks(lexical, on_lex)
        temporal = 1.0 + w.temporal_boost * affinity
        factors = np.column_stack(
            [
                pool_relative(self.features[:, EPISTEMIC_INDEX], on_any),
                pool_relative(boosts, on_any),
                pool_relative(temporal, on_any),
            ]
        )
        self.fusion = (sem_rank, lex_rank, factors)
        return rank_fused_scores(
            sem_rank.astype(np.float64), lex_rank.astype(np.float64), factors, np.full(semantic.size, float(w.rrf_k))
        )

    def _rerank(self, items: list[Ranked]) -> list[Ranked] | None:
        reranker = self.p.reranker
        if reranker is None or not items:
            return None
        settings = self.p.reranker_settings
        prefix = items[: settings.top_k]
        neural = reranker.score(self.req.query, [self.corpus.content[r.row] for r in prefix])
        for r, value in zip(prefix, neural):
            value = min(max(float(value), 0.0), 1.0)
            r.with_op(Op("neural_blend", settings.prior_weight, value))
            r.reranker_score = value
        return ordered(items, "reranked_prefix")

    # --- packing and recording ----------------------------------------------------------

    def result(self, rank: int, r: Ranked, entries: dict[UUID, ContextEntry]) -> RetrievedMemory:
        """The returned memory at ``rank``; ``entries`` are the bundle's entries by node id. The
        node's fixed fields come from its pack item (``bundling.pack_run`` made one for every
        ranked row of this corpus before results are built)."""
        item = self.corpus.extras[PACK_ITEMS][r.row]
        entry = entries.get(item.node_id)
        return RetrievedMemory(
            node_id=item.node_id,
            rank=rank,
            score=r.score,
            content=item.content,
            scope=item.scope,
            node_type=item.node_type,
            session_id=item.session_id,
            event_time=item.event_time,
            paths=tuple(sorted(r.paths)),
            cross_scope=r.cross_scope,
            in_context=entry is not None,
            representation=entry.representation if entry else None,
        )
