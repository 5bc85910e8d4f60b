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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

import numpy as np
from pydantic import Field, StrictBool, StrictFloat, StrictInt, StringConstraints, model_validator

from prme_core.canonical import utc_isoformat
from prme_core.errors import InvalidInput, UnsupportedOperation
from prme_core.features import EPISTEMIC_INDEX, INTERACTION_NAMES, TRACE_FEATURES
from prme_core.memory.models import ScopeName
from prme_core.receipts.model import (
    CURRENT_SCHEMA_VERSION,
    RankFusion,
    ReceiptCandidate,
    RetrievalExecution,
    RetrievalReceipt,
    ScoreAdjustment,
    ScoreProvenance,
    ScoreTrace,
)
from prme_core.receipts.pool import PoolColumns, PoolSummary, replay_context
from prme_core.receipts.store import persist_receipt
from prme_core.retrieval import candidates as generation
from prme_core.retrieval.bm25 import Bm25Parameters
from prme_core.retrieval.config import Fidelity, PackingConfig, ScoringWeights
from prme_core.retrieval.corpus import Corpus, CorpusCache, lexical_identity
from prme_core.retrieval.embedding import EmbeddingProvider
from prme_core.retrieval.execution import execution_features, feature_identity_sha256
from prme_core.retrieval.formula import SortPolicy, rank_fused_scores
from prme_core.retrieval.interaction import QueryTerms, interaction_features
from prme_core.retrieval.multipliers import RankingMultipliers, adjusted_weights
from prme_core.retrieval.packing import ContextBundle, entry_cost, pack
from prme_core.retrieval.query_analysis import QueryAnalysis, analyze_query, temporal_affinity
from prme_core.retrieval.ranked import Op, Ranked, ordered
from prme_core.retrieval.ranking import ScoredPool, formula_scores, path_mask, path_score, rank_pool
from prme_core.retrieval.rendering import PackItem
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
    FrozenModel,
    NonBlank,
    Normalized,
    NulFree,
    Owner,
    UtcDatetime,
    WindowEnd,
    from_epoch_us,
    to_epoch_us,
    utc_now,
)
from prme_core.validation import check_owner, check_scope_set, parse_model

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4096
MAX_RESULT_LIMIT = 200

QueryText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS), NulFree, NonBlank]
"""A query as a caller writes it: 1..4096 characters, not blank, no NUL."""

EpistemicMode = Literal["all", "reliable", "observed"]
EPISTEMIC_MODES: dict[str, frozenset[str] | None] = {
    "all": None,
    "reliable": frozenset({"observed", "asserted", "inferred"}),
    "observed": frozenset({"observed"}),
}
"""Which memories a retrieval may return by their epistemic type: ``all`` (the default);
``reliable`` leaves out hypothetical, conditional, deprecated and unverified memories; ``observed``
keeps observed ones only. A filter on eligibility, like the time windows: it never reweights."""


class RetrievalRequest(FrozenModel):
    """A validated retrieval request (every bound explicit)."""

    query: QueryText
    owner: Owner
    scopes: Annotated[tuple[ScopeName, ...], Field(min_length=1), Normalized]
    reference_time: UtcDatetime
    limit: StrictInt = Field(default=20, ge=1, le=MAX_RESULT_LIMIT)
    min_score: StrictFloat = Field(default=0.0, ge=0.0, le=10.0)
    time_from: UtcDatetime | None = None
    time_to: WindowEnd = None
    event_time_from: UtcDatetime | None = None
    event_time_to: WindowEnd = None
    scoring: ScoringWeights
    packing: PackingConfig
    ranking_multipliers: RankingMultipliers | None = None
    include_cross_scope: StrictBool = False
    retrieval_mode: Annotated[str, StringConstraints(pattern="^(hybrid|lexical|semantic)$")] = "hybrid"
    epistemic_mode: EpistemicMode = "all"

    @model_validator(mode="after")
    def _coherent(self) -> RetrievalRequest:
        if (
            self.scoring.fusion == "rrf"
            and self.ranking_multipliers is not None
            and not self.ranking_multipliers.is_unity()
        ):
            raise ValueError("ranking multipliers adjust the weighted formula and do not apply to fusion='rrf'")
        return self


@dataclass(frozen=True)
class RetrievedMemory:
    """One returned memory, in rank order."""

    node_id: UUID
    rank: int
    score: float
    content: str
    scope: str
    node_type: str
    session_id: str | None
    event_time: UtcDatetime | None
    paths: tuple[str, ...]
    cross_scope: bool
    in_context: bool
    representation: str | None


class RetrievalMetadata(FrozenModel):
    request_id: UUID
    receipt_persisted: bool
    receipt_checksum: str | None
    receipt_error: str | None = None
    schema_version: int
    ranking_policy: str
    ranking_multipliers: dict[str, float] | None
    ranking_profile_id: UUID | None
    ranking_profile_status: str
    ranking_profile_reason: str | None
    candidate_pool_size: int
    context_tokens: int
    context_sha256: str
    duration_ms: float


@dataclass(frozen=True)
class RetrievalResponse:
    """What ``retrieve`` returns: results, the packed bundle, the receipt and metadata.

    A plain frozen dataclass: its parts are validated models already, and nesting them in
    another pydantic model would re-run their (replay-checking) validators.
    """

    results: tuple[RetrievedMemory, ...]
    bundle: ContextBundle
    receipt: RetrievalReceipt
    metadata: RetrievalMetadata

    @property
    def context(self) -> str:
        """The exact rendered context whose SHA-256 is the receipt's context hash."""
        return self.bundle.render()


@dataclass(frozen=True)
class ProfileResolution:
    """Which request-local multipliers apply and why (see profiles.resolution)."""

    status: str  # none | applied | inapplicable | request_override
    multipliers: RankingMultipliers | None = None
    profile_id: UUID | None = None
    reason: str | None = None

    def as_parameters(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "profile_id": str(self.profile_id) if self.profile_id else None,
            "reason": self.reason,
        }


ProfileResolver = Callable[[str, tuple[str, ...], ScoringWeights, str], ProfileResolution]


def _no_profiles(owner: str, scopes: tuple[str, ...], scoring: ScoringWeights, features_sha: str) -> ProfileResolution:
    return ProfileResolution("none")


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
        if request.ranking_multipliers is not None:
            resolution = ProfileResolution(
                "request_override", request.ranking_multipliers, None, "explicit_multipliers"
            )
        else:
            resolution = self.resolve_profile(
                request.owner, request.scopes, request.scoring, feature_identity_sha256(features)
            )
        corpus = self.corpora.get(request.owner)
        run = _Run(self, request, corpus, resolution)
        ranked = run.rank()
        bundle = run.pack(ranked)
        receipt = run.receipt(request_id, ranked, bundle, features)
        persisted, checksum, error = True, None, None
        try:
            checksum = persist_receipt(self.store, receipt).checksum
        except Exception as exc:  # noqa: BLE001 - retrieval must survive any logging failure
            persisted, error = False, f"{type(exc).__name__}: {exc}"
            log.warning("retrieval %s: receipt not persisted: %s", request_id, error)
        results = tuple(run.result(i, r, bundle) for i, r in enumerate(ranked))
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


class _Run:
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
        boosts = np.array([w.boost(c.node_type[r]) for r in rows], dtype=np.float64)
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
            node_keys=[c.uuids[r].int for r in pool.rows],
            features=self.features,
            paths=pool.paths,
            cross_scope=[bool(cross[r]) for r in pool.rows],
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

    def pack(self, ranked: list[Ranked]) -> ContextBundle:
        c = self.corpus
        templates: dict[int, PackItem] = c.extras.setdefault("pack_items", {})
        items = []
        for i, r in enumerate(ranked):
            template = templates.get(r.row)
            if template is None:
                template = templates[r.row] = PackItem(
                    node_id=c.uuids[r.row],
                    rank=0,
                    score=0.0,
                    node_type=c.node_type[r.row],
                    scope=str(c.scope[r.row]),
                    content=c.content[r.row],
                    event_time=from_epoch_us(_opt_int(c.event_us[r.row])),
                    created_at=from_epoch_us(int(c.created_us[r.row])),
                    valid_from=from_epoch_us(_opt_int(c.valid_from_us[r.row])),
                    valid_to=from_epoch_us(_opt_int(c.valid_to_us[r.row])),
                    epistemic_type=c.epistemic_type[r.row],
                    session_id=c.session_id[r.row],
                )
            # rank, score and paths are per request; the rest of a node's item never changes
            items.append(template.model_copy(update={"rank": i, "score": r.score, "paths": tuple(sorted(r.paths))}))
        costs: dict[tuple[UUID, str, str], int] = c.extras.setdefault("entry_costs", {})

        def cached_cost(item: PackItem, representation: str, fmt: str) -> int:
            key = (item.node_id, representation, fmt)
            found = costs.get(key)
            if found is None:
                found = costs[key] = entry_cost(item, representation, fmt)  # type: ignore[arg-type]
            return found

        return pack(
            items,
            self.req.packing,
            reference_time=self.req.reference_time,
            temporal_query=self.analysis.intent == "temporal",
            cost=cached_cost,
        )

    def receipt(
        self, request_id: UUID, ranked: list[Ranked], bundle: ContextBundle, features: dict[str, Any]
    ) -> RetrievalReceipt:
        c, req = self.corpus, self.req
        position = {e.node_id: i for i, e in enumerate(bundle.entries)}
        entries = {e.node_id: e for e in bundle.entries}
        formula = 1 if self.applied.fusion == "weighted" else 2
        pool, columns, packed = self._pool_record()
        candidates = []
        for r in ranked:
            node = c.uuids[r.row]
            entry = entries.get(node)
            candidates.append(
                ReceiptCandidate(
                    node_id=node,
                    scope=str(c.scope[r.row]),
                    content_sha256=c.content_hash[r.row],
                    score=r.score,
                    paths=tuple(sorted(r.paths)),
                    cross_scope=r.cross_scope,
                    provenance=self._provenance(r, formula),
                    reranker_score=r.reranker_score,
                    in_context=entry is not None,
                    context_position=position.get(node),
                    representation=entry.representation if entry else None,
                    has_content=bool(entry and entry.has_content),
                    token_cost=entry.token_cost if entry else 0,
                )
            )
        return RetrievalReceipt.build(
            schema_version=CURRENT_SCHEMA_VERSION,
            request_id=request_id,
            owner=req.owner,
            query=req.query,
            reference_time=req.reference_time,
            scopes=req.scopes,
            retrieval_mode=req.retrieval_mode,
            result_limit=req.limit,
            min_score=req.min_score,
            time_from=req.time_from,
            time_to=req.time_to,
            scoring=req.scoring,
            packing=req.packing,
            weight_sets=(self.applied,),
            ranking_policy=self.policy,
            candidates=tuple(candidates),
            context_sha256=bundle.context_sha256(),
            context_tokens=bundle.tokens_used,
            execution=RetrievalExecution(parameters=self._parameters(), features=features),
            pool=pool,
            packed_pool=packed,
            pool_columns=columns,
        )

    def _pool_record(self) -> tuple[PoolSummary, PoolColumns, bytes]:
        """The scored pool to ``receipt_pool_depth`` members in base order (``receipts.pool``):
        its summary for the receipt, its columns, and their packed form."""
        c, req = self.corpus, self.req
        depth, size = req.packing.receipt_pool_depth, len(self.pool_rows)
        reason = (
            "rank_fusion"
            if self.applied.fusion != "weighted"
            else "neural_reranker"
            if self.p.reranker is not None
            else "episode_routing"
            if req.packing.episode_context_top_k > 0
            else None
        )
        chosen = self.base_order[:depth]
        rows = [self.pool_rows[i] for i in chosen]
        offsets: list[int] = []
        offsets = refs = np.zeros(0, dtype=np.int64)
        outside = np.zeros(0, dtype=np.int64)
        if rows and req.packing.session_context_top_k > 0:
            offsets, refs, outside = self._pool_neighbours(np.array(rows, dtype=np.int64))
        eligible = self.scored.update_eligible if rows else ()
        cross = self.scored.cross_scope if rows else ()
        context = replay_context(
            scoring=req.scoring,
            multipliers=None if self.multipliers is None else self.multipliers.model_dump(),
            packing=req.packing,
            min_score=req.min_score,
            result_limit=req.limit,
            current_state=self.current_state,
            episodic=self.episodic,
            complete=size <= depth,
            replayable=reason is None,
        )
        columns = PoolColumns.of(
            tuple(c.uuids[r] for r in rows),
            tuple(c.uuids[r] for r in outside.tolist()),
            features=self.features[chosen] if rows else np.zeros((0, len(TRACE_FEATURES))),
            paths=np.array([path_mask(self.pool.paths[i]) for i in chosen], dtype=np.uint8),
            cross_scope=np.array([cross[i] for i in chosen], dtype=bool),
            update_eligible=np.array([bool(eligible[i]) for i in chosen], dtype=bool),
            neighbour_offsets=offsets,
            neighbour_refs=refs,
            outside_cross_scope=self.cross_mask[outside] if outside.size else np.zeros(0, dtype=bool),
            replay=context,
        )
        packed = columns.pack()
        summary = PoolSummary.describe(
            columns,
            packed,
            depth=depth,
            size=size,
            reason=reason,
            current_state=self.current_state,
            episodic=self.episodic,
        )
        return summary, columns, packed

    def _pool_neighbours(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, references, outside rows) of the recorded members' eligible session
        neighbours: a reference below the member count names a member, otherwise an outside
        node, numbered in the order the members first name it (``receipts.pool``)."""
        table_offsets, table_rows = self.corpus.session_windows(self.req.packing.session_context_window)
        starts, ends = table_offsets[rows], table_offsets[rows + 1]
        counts = ends - starts
        flat = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
        candidates = table_rows[flat]
        owner = np.repeat(np.arange(rows.size), counts)
        keep = self.eligible_mask[candidates]
        candidates, owner = candidates[keep], owner[keep]
        position = np.full(self.corpus.size, -1, dtype=np.int64)
        position[rows] = np.arange(rows.size)
        member = position[candidates]
        others = candidates[member < 0]
        first = np.unique(others, return_index=True)[1]
        outside = others[np.sort(first)]  # outside nodes in the order of first mention
        number = np.full(self.corpus.size, -1, dtype=np.int64)
        number[outside] = rows.size + np.arange(outside.size)
        refs = np.where(member >= 0, member, number[candidates])
        offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=rows.size))])
        return offsets.astype(np.int64), refs.astype(np.int64), outside

    def _provenance(self, r: Ranked, formula: int) -> ScoreProvenance:
        f = self.features[r.source]
        trace = ScoreTrace(
            **dict(zip(TRACE_FEATURES, f.tolist(), strict=True)),
            path_score=float(self.path_scores[r.source]),
            base_score=float(self.base[r.source]),
        )
        fusion = None
        if formula == 2:
            sem_rank, lex_rank, factors = self.fusion  # type: ignore[misc]
            fusion = RankFusion(
                semantic_rank=int(sem_rank[r.source]) or None,
                lexical_rank=int(lex_rank[r.source]) or None,
                epistemic_factor=float(factors[r.source, 0]),
                node_type_factor=float(factors[r.source, 1]),
                temporal_factor=float(factors[r.source, 2]),
            )
        ops = tuple(
            ScoreAdjustment(
                kind=op.kind,
                coefficient=op.coefficient,
                neural_score=op.neural_score,
                source_node_id=None if op.source_row is None else self.corpus.uuids[op.source_row],
            )
            for op in r.ops
        )
        return ScoreProvenance(
            formula_version=formula,
            base_node_id=self.corpus.uuids[self.pool_rows[r.source]],
            weights=0,
            trace=trace,
            adjustments=ops,
            rank_fusion=fusion,
        )

    def _parameters(self) -> dict[str, Any]:
        """Execution parameters; unset (None) values are omitted, never written as null."""
        req = self.req
        return _without_none(
            {
                "ranking_multipliers": None if self.multipliers is None else self.multipliers.model_dump(),
                "ranking_profile": self.resolution.as_parameters(),
                "time_from": _iso(req.time_from),
                "time_to": _iso(req.time_to),
                "event_time_from": _iso(req.event_time_from),
                "event_time_to": _iso(req.event_time_to),
                "include_cross_scope": req.include_cross_scope,
                "epistemic_mode": None if req.epistemic_mode == "all" else req.epistemic_mode,
                "query_adjustment": self.redistribution.as_parameters(),
                "query_analysis": {
                    "intent": self.analysis.intent,
                    "current_state": self.analysis.current_state,
                    "episodic": self.analysis.episodic,
                    "window_start": _iso(self.analysis.window_start),
                    "window_end": _iso(self.analysis.window_end),
                },
                "candidate_generation": generation.generation_parameters(),
                "reranker": {
                    "top_k": self.p.reranker_settings.top_k,
                    "prior_weight": self.p.reranker_settings.prior_weight,
                }
                if self.p.reranker is not None
                else None,
            }
        )

    def result(self, rank: int, r: Ranked, bundle: ContextBundle) -> RetrievedMemory:
        c = self.corpus
        node = c.uuids[r.row]
        entry = bundle.entry(node)
        return RetrievedMemory(
            node_id=node,
            rank=rank,
            score=r.score,
            content=c.content[r.row],
            scope=str(c.scope[r.row]),
            node_type=c.node_type[r.row],
            session_id=c.session_id[r.row],
            event_time=from_epoch_us(_opt_int(c.event_us[r.row])),
            paths=tuple(sorted(r.paths)),
            cross_scope=r.cross_scope,
            in_context=entry is not None,
            representation=entry.representation if entry else None,
        )


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    return value


def _opt_int(value: float) -> int | None:
    return None if np.isnan(value) else int(value)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else utc_isoformat(value)


def build_request(
    owner: Any,
    query: Any,
    *,
    scopes: Any,
    default_scopes: tuple[str, ...],
    default_scoring: ScoringWeights,
    default_packing: PackingConfig,
    reference_time: Any = None,
    limit: Any = 20,
    min_score: Any = 0.0,
    token_budget: Any = None,
    time_from: Any = None,
    time_to: Any = None,
    event_time_from: Any = None,
    event_time_to: Any = None,
    min_fidelity: Fidelity | None = None,
    scoring: Any = None,
    packing: Any = None,
    ranking_multipliers: Any = None,
    include_cross_scope: Any = False,
    retrieval_mode: Any = "hybrid",
    epistemic_mode: Any = "all",
) -> RetrievalRequest:
    """Validate retrieve() arguments into a request; raise ``InvalidInput`` naming the field."""
    owner = check_owner(owner)
    scopes = check_scope_set(default_scopes if scopes is None else scopes, allowed=default_scopes)
    scoring_model = _merged(ScoringWeights, default_scoring, scoring, "scoring")
    packing_updates: dict[str, Any] = {}
    if token_budget is not None:
        packing_updates["token_budget"] = token_budget
    if min_fidelity is not None:
        packing_updates["min_fidelity"] = min_fidelity
    packing_model = _merged(PackingConfig, default_packing, packing, "packing", extra=packing_updates)
    multipliers = (
        None
        if ranking_multipliers is None
        else parse_model(RankingMultipliers, ranking_multipliers, "ranking_multipliers")
    )
    if multipliers is not None and scoring_model.fusion == "rrf" and not multipliers.is_unity():
        raise UnsupportedOperation(
            "ranking_multipliers: they adjust the weighted formula and do not apply to fusion='rrf'"
        )
    return parse_model(
        RetrievalRequest,
        {
            "query": query,
            "owner": owner,
            "scopes": tuple(scopes),
            "reference_time": utc_now() if reference_time is None else reference_time,
            "limit": limit,
            "min_score": min_score,
            "time_from": time_from,
            "time_to": time_to,
            "event_time_from": event_time_from,
            "event_time_to": event_time_to,
            "scoring": scoring_model,
            "packing": packing_model,
            "ranking_multipliers": multipliers,
            "include_cross_scope": include_cross_scope,
            "retrieval_mode": retrieval_mode,
            "epistemic_mode": epistemic_mode,
        },
        "",
    )


def _merged(model: type, default: Any, override: Any, field: str, extra: Mapping[str, Any] | None = None) -> Any:
    if isinstance(override, model):
        base = override.model_dump()
    elif override is None:
        base = default.model_dump()
    elif isinstance(override, Mapping):
        base = {**default.model_dump(), **dict(override)}
    else:
        raise InvalidInput(field, f"must be a {model.__name__} or a mapping of its fields")
    if extra:
        base.update(extra)
    return parse_model(model, base, field)
