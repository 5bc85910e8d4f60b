"""Receipt assembly: what a ranked, packed retrieval records — each returned candidate with
its score provenance, the scored pool (``receipts.pool``), the execution parameters and the
pipeline's features — as the current receipt version."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import numpy as np

from prme_core.canonical import utc_isoformat
from prme_core.features import TRACE_FEATURES
from prme_core.receipts.model import (
    CURRENT_SCHEMA_VERSION,
    RetrievalExecution,
    RetrievalReceipt,
)
from prme_core.receipts.pool import PoolColumns, PoolSummary, replay_context
from prme_core.retrieval import candidates as generation
from prme_core.retrieval.corpus import Corpus
from prme_core.retrieval.packing import ContextBundle
from prme_core.retrieval.ranked import Ranked
from prme_core.retrieval.ranking import path_mask

if TYPE_CHECKING:
    from prme_core.retrieval.pipeline import Run


def assemble_receipt(
    run: Run, request_id: UUID, ranked: list[Ranked], bundle: ContextBundle, features: dict[str, Any]
) -> RetrievalReceipt:
    """The current-version receipt of a ranked and packed run (candidates with provenance, the
    scored pool, execution parameters and features)."""
    c, req = run.corpus, run.req
    position = {e.node_id: i for i, e in enumerate(bundle.entries)}
    entries = {e.node_id: e for e in bundle.entries}
    formula = 1 if run.applied.fusion == "weighted" else 2
    pool, columns, packed = pool_record(run)
    scored = _Scored(run) if ranked else None  # an empty pool has no feature arrays
    candidates = []  # as fields: the receipt validates them all in one call (each exactly once)
    for r in ranked:
        node = c.uuids[r.row]
        entry = entries.get(node)
        candidates.append(
            {
                "node_id": node,
                "scope": str(c.scope[r.row]),
                "content_sha256": c.content_hash[r.row],
                "score": r.score,
                "paths": tuple(sorted(r.paths)),
                "cross_scope": r.cross_scope,
                "provenance": provenance(run, r, formula, scored),
                "reranker_score": r.reranker_score,
                "in_context": entry is not None,
                "context_position": position.get(node),
                "representation": entry.representation if entry else None,
                "has_content": bool(entry and entry.has_content),
                "token_cost": entry.token_cost if entry else 0,
            }
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
        weight_sets=(run.applied,),
        ranking_policy=run.policy,
        candidates=tuple(candidates),
        context_sha256=bundle.context_sha256(),
        context_tokens=bundle.tokens_used,
        execution=RetrievalExecution(parameters=execution_parameters(run), features=features),
        pool=pool,
        packed_pool=packed,
        pool_columns=columns,
    )


def pool_record(run: Run) -> tuple[PoolSummary, PoolColumns, bytes]:
    """The scored pool to ``receipt_pool_depth`` members in base order (``receipts.pool``):
    its summary for the receipt, its columns, and their packed form."""
    c, req = run.corpus, run.req
    depth, size = req.packing.receipt_pool_depth, len(run.pool_rows)
    reason = (
        "rank_fusion"
        if run.applied.fusion != "weighted"
        else "neural_reranker"
        if run.p.reranker is not None
        else "episode_routing"
        if req.packing.episode_context_top_k > 0
        else None
    )
    chosen = run.base_order[:depth]
    rows = [run.pool_rows[i] for i in chosen]
    offsets: list[int] = []
    offsets = refs = np.zeros(0, dtype=np.int64)
    outside = np.zeros(0, dtype=np.int64)
    if rows and req.packing.session_context_top_k > 0:
        offsets, refs, outside = pool_neighbours(run, np.array(rows, dtype=np.int64))
    eligible = run.scored.update_eligible if rows else ()
    cross = run.scored.cross_scope if rows else ()
    context = replay_context(
        scoring=req.scoring,
        multipliers=None if run.multipliers is None else run.multipliers.model_dump(),
        packing=req.packing,
        min_score=req.min_score,
        result_limit=req.limit,
        current_state=run.current_state,
        episodic=run.episodic,
        complete=size <= depth,
        replayable=reason is None,
    )
    id_bytes = node_id_bytes(c)
    columns = PoolColumns(
        node_bytes=id_bytes[np.asarray(rows, dtype=np.int64)].tobytes(),
        outside_bytes=id_bytes[outside].tobytes(),
        features=run.features[chosen] if rows else np.zeros((0, len(TRACE_FEATURES))),
        paths=np.array([path_mask(run.pool.paths[i]) for i in chosen], dtype=np.uint8),
        cross_scope=np.asarray(cross, dtype=bool)[chosen] if rows else np.zeros(0, dtype=bool),
        update_eligible=np.asarray(eligible, dtype=bool)[chosen] if rows else np.zeros(0, dtype=bool),
        neighbour_offsets=offsets,
        neighbour_refs=refs,
        outside_cross_scope=run.cross_mask[outside] if outside.size else np.zeros(0, dtype=bool),
        replay=context,
    )
    packed = columns.pack()
    summary = PoolSummary.describe(
        columns,
        packed,
        depth=depth,
        size=size,
        reason=reason,
        current_state=run.current_state,
        episodic=run.episodic,
    )
    return summary, columns, packed


def node_id_bytes(corpus: Corpus) -> np.ndarray:
    """The corpus's node ids as 16-byte rows (``UUID.bytes``, built once per corpus), so a
    pool's ids are one gather instead of a conversion per member."""
    found = corpus.extras.get("node_id_bytes")
    if found is None:
        raw = b"".join(u.bytes for u in corpus.uuids)
        found = corpus.extras["node_id_bytes"] = np.frombuffer(raw, dtype=np.uint8).reshape(len(corpus.uuids), 16)
    return found


def pool_neighbours(run: Run, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, references, outside rows) of the recorded members' eligible session
    neighbours: a reference below the member count names a member, otherwise an outside
    node, numbered in the order the members first name it (``receipts.pool``)."""
    table_offsets, table_rows = run.corpus.session_windows(run.req.packing.session_context_window)
    starts, ends = table_offsets[rows], table_offsets[rows + 1]
    counts = ends - starts
    flat = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
    candidates = table_rows[flat]
    owner = np.repeat(np.arange(rows.size), counts)
    keep = run.eligible_mask[candidates]
    candidates, owner = candidates[keep], owner[keep]
    position = np.full(run.corpus.size, -1, dtype=np.int64)
    position[rows] = np.arange(rows.size)
    member = position[candidates]
    others = candidates[member < 0]
    first = np.unique(others, return_index=True)[1]
    outside = others[np.sort(first)]  # outside nodes in the order of first mention
    number = np.full(run.corpus.size, -1, dtype=np.int64)
    number[outside] = rows.size + np.arange(outside.size)
    refs = np.where(member >= 0, member, number[candidates])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=rows.size))])
    return offsets.astype(np.int64), refs.astype(np.int64), outside


class _Scored:
    """A run's per-member features, path scores and base scores as Python floats, converted
    once for all the candidates of a receipt instead of once per candidate."""

    def __init__(self, run: Run) -> None:
        self.features: list[list[float]] = run.features.tolist()
        self.path_scores: list[float] = run.path_scores.tolist()
        self.base: list[float] = run.base.tolist()


def provenance(run: Run, r: Ranked, formula: int, scored: _Scored | None = None) -> dict[str, Any]:
    """A returned candidate's ``ScoreProvenance`` fields (validated with its receipt)."""
    s = scored or _Scored(run)
    trace = dict(zip(TRACE_FEATURES, s.features[r.source], strict=True))
    trace["path_score"] = s.path_scores[r.source]
    trace["base_score"] = s.base[r.source]
    fusion = None
    if formula == 2:
        sem_rank, lex_rank, factors = run.fusion  # type: ignore[misc]
        fusion = {
            "semantic_rank": int(sem_rank[r.source]) or None,
            "lexical_rank": int(lex_rank[r.source]) or None,
            "epistemic_factor": float(factors[r.source, 0]),
            "node_type_factor": float(factors[r.source, 1]),
            "temporal_factor": float(factors[r.source, 2]),
        }
    ops = tuple(
        {
            "kind": op.kind,
            "coefficient": op.coefficient,
            "neural_score": op.neural_score,
            "source_node_id": None if op.source_row is None else run.corpus.uuids[op.source_row],
        }
        for op in r.ops
    )
    return {
        "formula_version": formula,
        "base_node_id": run.corpus.uuids[run.pool_rows[r.source]],
        "weights": 0,
        "trace": trace,
        "adjustments": ops,
        "rank_fusion": fusion,
    }


def execution_parameters(run: Run) -> dict[str, Any]:
    """Execution parameters; unset (None) values are omitted, never written as null."""
    req = run.req
    return without_none(
        {
            "ranking_multipliers": None if run.multipliers is None else run.multipliers.model_dump(),
            "ranking_profile": run.resolution.as_parameters(),
            "time_from": _iso(req.time_from),
            "time_to": _iso(req.time_to),
            "event_time_from": _iso(req.event_time_from),
            "event_time_to": _iso(req.event_time_to),
            "include_cross_scope": req.include_cross_scope,
            "epistemic_mode": None if req.epistemic_mode == "all" else req.epistemic_mode,
            "query_adjustment": run.redistribution.as_parameters(),
            "query_analysis": {
                "intent": run.analysis.intent,
                "current_state": run.analysis.current_state,
                "episodic": run.analysis.episodic,
                "window_start": _iso(run.analysis.window_start),
                "window_end": _iso(run.analysis.window_end),
            },
            "candidate_generation": generation.generation_parameters(),
            "reranker": {
                "top_k": run.p.reranker_settings.top_k,
                "prior_weight": run.p.reranker_settings.prior_weight,
            }
            if run.p.reranker is not None
            else None,
        }
    )


def without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_none(v) for k, v in value.items() if v is not None}
    return value


def opt_int(value: float) -> int | None:
    return None if np.isnan(value) else int(value)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else utc_isoformat(value)
