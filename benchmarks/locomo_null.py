"""The null control: the same learning step on labels shuffled within each request.

Each seed permutes every relevance record's label values among the candidates that record
labelled (so each request keeps its number of positives and negatives, and its receipt), then
runs the pure offline evaluation on that snapshot. A seed that passes offline also gets a real
paired holdout (base scoring against its multipliers) to see whether it would have activated.
The shuffled snapshot gets its own identity, so no shuffled proposal can pass for the real one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from prme_core.canonical import canonical_digest
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import FullRetrievalEvaluationConfig
from prme_core.learning.offline import evaluate_learning
from prme_core.learning.snapshot import FeedbackSnapshot, snapshot_digest
from prme_core.retrieval.multipliers import UNITY

PASSED_OFFLINE = "improved_on_observed_candidates"
PASSED_HOLDOUT = "improved_full_retrieval"


def permute_labels(labels: Mapping[Any, bool], rng: np.random.Generator) -> dict[Any, bool]:
    """One request's label values permuted among the candidates it labelled (nodes in sorted
    order, so the same generator state gives the same labels)."""
    nodes = sorted(labels)
    values = [labels[n] for n in nodes]
    permuted = rng.permutation(len(values))
    return {n: values[int(j)] for n, j in zip(nodes, permuted)}


def shuffled_labels(labels: Mapping[Any, bool], seed: int, position: int) -> dict[Any, bool]:
    """``permute_labels`` with its own PCG64 generator seeded by (seed, position): a request's
    shuffle depends only on the seed and where the request stands, not on what came before."""
    return permute_labels(labels, np.random.Generator(np.random.PCG64([seed, position])))


def shuffled_snapshot(snapshot: FeedbackSnapshot, seed: int) -> FeedbackSnapshot:
    """``snapshot`` with each record's label values permuted among its labelled candidates."""
    rng = np.random.Generator(np.random.PCG64(seed))
    records, checksums = [], {}
    for record in snapshot.records:  # sorted by feedback id: the same seed gives the same labels
        labels = permute_labels(record.labels, rng)
        records.append(dataclasses.replace(record, labels=labels))
        checksums[record.feedback_id] = canonical_digest(
            ["prme:locomo-null-control:v1", seed, record.feedback_id, sorted(labels.items())]
        )
    return dataclasses.replace(
        snapshot,
        records=tuple(records),
        record_checksums=checksums,
        snapshot_sha256=snapshot_digest(checksums, snapshot.receipts),
    )


def null_control(
    client: Any,
    snapshot: FeedbackSnapshot,
    *,
    owner: str,
    scopes: list[str],
    seeds: int,
    learning: LearningConfig,
    holdout: FullRetrievalEvaluationConfig,
) -> dict[str, Any]:
    rows = []
    for seed in range(seeds):
        proposal = evaluate_learning(shuffled_snapshot(snapshot, seed), owner=owner, scopes=scopes, config=learning)
        row: dict[str, Any] = {
            "seed": seed,
            "offline_decision": proposal.decision,
            "validation_ndcg_gain": proposal.validation_ndcg_gain,
            "validation_gain_interval": proposal.validation_gain_interval,
            "multipliers": proposal.multipliers.model_dump(),
            "holdout_decision": None,
            "holdout_ndcg_gain": None,
            "would_activate": False,
        }
        if proposal.decision == PASSED_OFFLINE:
            run = client.run_holdout(
                owner,
                scopes,
                candidate_multipliers=proposal.multipliers,
                baseline_multipliers=UNITY,
                excluded_query_digests=proposal.query_digests(),
            )
            evaluation = run.evaluate(proposal.input_checksum, holdout)
            row.update(
                holdout_decision=evaluation.decision,
                holdout_ndcg_gain=evaluation.ndcg_gain,
                would_activate=evaluation.decision == PASSED_HOLDOUT,
            )
        rows.append(row)
    offline = sum(r["offline_decision"] == PASSED_OFFLINE for r in rows)
    held = sum(r["holdout_decision"] == PASSED_HOLDOUT for r in rows)
    return {
        "seeds": seeds,
        "offline_accepts": offline,
        "holdout_accepts": held,
        "would_activate": sum(r["would_activate"] for r in rows),
        "insufficient_data": sum(r["offline_decision"] == "insufficient_data" for r in rows),
        "per_seed": rows,
    }
