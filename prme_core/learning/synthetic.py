"""Synthetic receipts and judgments with a planted signal (tests, benchmarks, null controls).

Each receipt is a genuine, replayable receipt of the current schema version: additive features
are drawn at random (factor features are neutral), scores come from the real formula under the
default weights, candidates are ordered by the real sort policy. Relevance is planted on one
feature (``signal``): a candidate is relevant when that feature plus noise exceeds a threshold,
so a learner that raises that feature's weight should improve, and a learner fed labels
shuffled within each request should not.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import UUID

import numpy as np

from prme_core.features import FACTOR_NAMES, INTERACTION_COUNT, NEUTRAL_FACTORS, TRACE_FEATURES, WEIGHT_COUNT
from prme_core.feedback.relevance import RelevanceRecord
from prme_core.receipts.model import (
    CURRENT_SCHEMA_VERSION,
    ReceiptCandidate,
    RetrievalExecution,
    RetrievalReceipt,
    ScoreProvenance,
    ScoreTrace,
)
from prme_core.receipts.pool import PoolColumns, PoolSummary, replay_context, unrecorded_pool
from prme_core.receipts.projection import scope_key
from prme_core.receipts.store import receipt_bytes
from prme_core.retrieval.config import WEIGHT_FIELDS, PackingConfig, ScoringWeights
from prme_core.retrieval.formula import sort_key, weighted_base_scores
from prme_core.types import sorted_unique

SYNTHETIC_CLOCK = datetime(2025, 1, 1, tzinfo=UTC)


def _uuid(rng: random.Random) -> UUID:
    return UUID(int=rng.getrandbits(128), version=4)


def synthetic_receipt(
    rng: random.Random,
    *,
    owner: str,
    query: str,
    scopes: Sequence[str] = ("personal",),
    candidates: int = 20,
    signal: str = "lexical",
    noise: float = 0.15,
    threshold: float = 0.75,
    weights: ScoringWeights | None = None,
    pool: int = 0,
) -> tuple[RetrievalReceipt, set[UUID]]:
    """A replayable receipt and the set of its candidates planted as relevant.

    With ``pool`` > 0 the request scored that many members (at least ``candidates``) and
    returned the best ``candidates`` of them; the receipt records the complete pool (session
    inheritance off), so it can be pool-replayed. Otherwise the pool is not recorded."""
    weights = weights or ScoringWeights()
    members = max(pool, candidates)
    neutral = [NEUTRAL_FACTORS[name] for name in FACTOR_NAMES] + [0.0] * INTERACTION_COUNT  # no interactions
    feats = np.array([[rng.random() for _ in range(WEIGHT_COUNT)] + neutral for _ in range(members)])
    signal_col = WEIGHT_FIELDS.index(signal)
    relevant_mask = feats[:, signal_col] + np.array([rng.gauss(0.0, noise) for _ in range(members)]) > threshold
    receipt, ids = features_receipt(
        rng, feats, owner=owner, query=query, scopes=scopes, candidates=candidates, weights=weights, pool=pool > 0
    )
    return receipt, {ids[i] for i in range(members) if relevant_mask[i]}


def synthetic_record(
    rng: random.Random,
    receipt: RetrievalReceipt,
    relevant: set[UUID],
    *,
    judged: int | None = None,
    shuffle: bool = False,
    method: str = "structured_evaluation",
    checksum: str | None = None,
) -> RelevanceRecord:
    """Labels for the first ``judged`` candidates (all by default); ``shuffle`` permutes the
    labels among those candidates (the null control: same label counts, no signal). ``checksum``:
    the receipt's checksum where the caller already holds it (computed here otherwise)."""
    nodes = [c.node_id for c in receipt.candidates][: judged or len(receipt.candidates)]
    labels = [n in relevant for n in nodes]
    if shuffle:
        rng.shuffle(labels)
    return RelevanceRecord(
        feedback_id=_uuid(rng),
        request_id=receipt.request_id,
        labels=dict(zip(nodes, labels)),
        surface="results",
        method=method,
        owner=receipt.owner,
        recorded_at=SYNTHETIC_CLOCK,
        receipt_checksum=checksum or hashlib.sha256(receipt_bytes(receipt)).hexdigest(),
        scope_key=scope_key(receipt.scopes),
    )


def features_receipt(
    rng: random.Random,
    feats: np.ndarray,
    *,
    owner: str,
    query: str,
    scopes: Sequence[str] = ("personal",),
    candidates: int = 20,
    weights: ScoringWeights | None = None,
    pool: bool = True,
) -> tuple[RetrievalReceipt, list[UUID]]:
    """A replayable receipt over given feature rows (``feats``: one row of ``TRACE_FEATURES``
    per pool member) and the members' node ids, in row order. Scores come from the real formula
    under ``weights``; the best ``candidates`` are returned; with ``pool`` the receipt records
    every row as its complete pool (session inheritance off), so it can be pool-replayed."""
    weights = weights or ScoringWeights()
    members = len(feats)
    w = np.tile(np.array(weights.additive_vector()), (members, 1))
    scalars = np.tile(np.array([weights.temporal_boost, weights.relevance_floor]), (members, 1))
    scores = weighted_base_scores(feats, w, scalars)
    ids = [_uuid(rng) for _ in range(members)]
    paths = [("lexical", "semantic") if rng.random() < 0.5 else ("lexical",) for _ in range(members)]
    path_scores = [min(len(p) / 3.0, 1.0) for p in paths]
    order = sorted(
        range(members), key=lambda i: sort_key("score_path_id", float(scores[i]), path_scores[i], ids[i].int, False)
    )
    if pool:
        packing = PackingConfig(receipt_pool_depth=members, session_context_top_k=0)
        context = replay_context(
            scoring=weights,
            multipliers=None,
            packing=packing,
            min_score=0.0,
            result_limit=candidates,
            current_state=False,
            episodic=False,
            complete=True,
            replayable=True,
        )
        columns = PoolColumns.of(
            tuple(ids[i] for i in order),
            (),
            features=feats[order],
            paths=np.array([1 if len(paths[i]) == 1 else 3 for i in order], dtype=np.uint8),
            cross_scope=np.zeros(members, dtype=bool),
            update_eligible=np.zeros(members, dtype=bool),
            neighbour_offsets=np.zeros(0, dtype=np.int64),
            neighbour_refs=np.zeros(0, dtype=np.int64),
            outside_cross_scope=np.zeros(0, dtype=bool),
            replay=context,
        )
        packed = columns.pack()
        summary = PoolSummary.describe(columns, packed, depth=members, size=members)
    else:
        packing = PackingConfig(receipt_pool_depth=0)
        summary, columns, packed = unrecorded_pool(
            candidates, scoring=weights, packing=packing, min_score=0.0, result_limit=candidates
        )
    cands = []
    for i in order[:candidates]:
        trace = ScoreTrace(
            **dict(zip(TRACE_FEATURES, (float(v) for v in feats[i]), strict=True)),
            path_score=path_scores[i],
            base_score=float(scores[i]),
        )
        cands.append(
            ReceiptCandidate(
                node_id=ids[i],
                scope=scopes[0],
                content_sha256=hashlib.sha256(ids[i].bytes).hexdigest(),
                score=float(scores[i]),
                paths=paths[i],
                provenance=ScoreProvenance(formula_version=1, base_node_id=ids[i], weights=0, trace=trace),
            )
        )
    receipt = RetrievalReceipt.build(
        schema_version=CURRENT_SCHEMA_VERSION,
        request_id=_uuid(rng),
        owner=owner,
        query=query,
        reference_time=SYNTHETIC_CLOCK,
        scopes=sorted_unique(scopes),
        result_limit=candidates,
        min_score=0.0,
        scoring=weights,
        packing=packing,
        weight_sets=(weights,),
        ranking_policy="score_path_id",
        candidates=tuple(cands),
        pool=summary,
        packed_pool=packed,
        pool_columns=columns,
        execution=RetrievalExecution(parameters={"synthetic": True}, features={"synthetic": "planted-signal-v1"}),
    )
    return receipt, ids
