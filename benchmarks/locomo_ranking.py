"""Rankings compared on the LoCoMo holdout, judged exactly like the holdout gate judges its arms.

Every ranking is a list of node ids per holdout trial, scored with recall@k, NDCG@k and MRR@k
against the trial's complete relevant set; trials are averaged within their query group, then
over groups (``full_retrieval``'s macro average). The rankings:

* the two arms of the holdout (read back from their receipts, so the figures must equal the
  holdout report's — checked);
* BM25 only and embedding only: the engine's own BM25 index and embedding index over every turn
  of the owner (no candidate pool, weights, session/episode expansion or limit other than k);
* recorded-feature reranks of the baseline arm's returned candidates (lexical or semantic trace
  feature alone), which show what the candidate list itself allows;
* rankings that re-rank the baseline arm's recorded pool (pool replay: exactly what a fresh
  retrieval over the same memory would return): the family-1 proposal of the judged-candidate
  fit ("learned v1"), and the family-2 holdout oracle — the family-2 adjustment that scores best
  on these holdout questions themselves, found by the pool fit's own search (reporting only: it
  shows what the family could reach, and chooses nothing);
* a LightGBM LambdaRank challenger trained on the feedback requests' recorded pools (the judged
  members' trace features and labels, training groups only) and applied to every member of the
  baseline arm's pool ("on the same pools").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np

from prme_core.datasets.locomo import feedback_id
from prme_core.features import FEATURE_COLUMNS, TRACE_FEATURES
from prme_core.learning.full_retrieval import FullRetrievalEvaluation
from prme_core.learning.metrics import mrr_at_k, ndcg_at_k, recall_at_k
from prme_core.learning.observations import Prepared
from prme_core.learning.pool_fit import POOL_NDCG_ALGORITHM, PoolObjective, search
from prme_core.learning.pool_ranking import PoolRequest, PoolSet
from prme_core.learning.snapshot import FeedbackSnapshot
from prme_core.learning.split import group_id
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.projection import FLOAT_COLUMNS, INT_COLUMNS, PackedProjection, packed_projection
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.multipliers import FAMILY_V2, RankingMultipliers, adjusted_weights
from prme_core.retrieval.pool_replay import replay_pool, scored_pool
from prme_core.retrieval.ranking import formula_scores
from prme_core.retrieval.scoring import redistribute
from prme_core.retrieval.text import lexical_tokens, normalize_query

METRICS = ("recall", "ndcg", "mrr")
_RECORDED = ("score", *FEATURE_COLUMNS)
FEATURE_NAMES = (*_RECORDED, "rank", "inherited")
"""What LambdaRank sees per candidate: the recorded score, the trace values, the rank and
whether the candidate's provenance was inherited from another node (session or episode)."""
LAMBDARANK_PARAMS = dict(
    objective="lambdarank",
    learning_rate=0.05,
    num_leaves=7,
    min_data_in_leaf=20,
    lambdarank_truncation_level=20,
    bagging_fraction=1.0,
    feature_fraction=1.0,
    lambda_l2=1.0,
    deterministic=True,
    force_row_wise=True,
    num_threads=1,
    verbose=-1,
)
LAMBDARANK_ROUNDS = 200
"""Fixed, small-tree settings chosen before looking at any LoCoMo result (no tuning, no early
stopping: validation labels never pick anything)."""
_FLOAT_INDEX = {name: i for i, name in enumerate(FLOAT_COLUMNS)}


@dataclass(frozen=True)
class Trial:
    """One holdout trial: its group, query, relevant set and both arms' receipts."""

    group_id: str
    query: str
    relevant: frozenset[UUID]
    baseline: RetrievalReceipt
    candidate: RetrievalReceipt


def holdout_trials(evaluation: FullRetrievalEvaluation, fetch: Callable[[UUID], RetrievalReceipt]) -> list[Trial]:
    out = []
    for t in evaluation.trials:
        baseline, candidate = fetch(t.baseline_request_id), fetch(t.candidate_request_id)
        out.append(Trial(t.group_id, baseline.query, frozenset(t.relevant_node_ids), baseline, candidate))
    return out


def judge(trials: Sequence[Trial], rankings: Sequence[Sequence[UUID]], k: int) -> dict[str, Any]:
    """Group-macro recall/NDCG/MRR@k of one ranking per trial, with the per-group values."""
    per_group: dict[str, list[tuple[float, float, float]]] = {}
    for trial, ranking in zip(trials, rankings, strict=True):
        flags = [node in trial.relevant for node in ranking]
        total = len(trial.relevant)
        per_group.setdefault(trial.group_id, []).append(
            (recall_at_k(flags, total, k), ndcg_at_k(flags, total, k), mrr_at_k(flags, k))
        )
    groups = {g: np.mean(np.array(v), axis=0) for g, v in sorted(per_group.items())}
    matrix = np.array(list(groups.values()))
    means = matrix.mean(axis=0)
    return {
        "k": k,
        "query_groups": len(groups),
        **{m: float(means[i]) for i, m in enumerate(METRICS)},
        "per_group": {g: {m: float(v[i]) for i, m in enumerate(METRICS)} for g, v in groups.items()},
    }


def receipt_order(receipt: RetrievalReceipt) -> list[UUID]:
    return [c.node_id for c in receipt.candidates]


def index_rankings(client: Any, owner: str, trials: Sequence[Trial], k: int) -> dict[str, list[list[UUID]]]:
    """BM25-only and embedding-only top-k over every turn of the owner (the engine's indexes)."""
    corpus = client.pipeline.corpora.get(owner)
    embedder = client.pipeline.embedder
    out: dict[str, list[list[UUID]]] = {"bm25_only": [], "semantic_only": []}
    rows = np.arange(corpus.size)
    for trial in trials:
        bm25 = corpus.lexical.scores(lexical_tokens(trial.query))
        cosine = corpus.vectors.cosine(embedder.embed_query(trial.query))
        for name, scores in (("bm25_only", bm25), ("semantic_only", cosine)):
            keep = rows[scores > 0.0]
            order = keep[np.lexsort((keep, -scores[keep]))][:k]  # ties by corpus order
            out[name].append([corpus.uuids[i] for i in order])
    return out


def candidate_features(projection: PackedProjection, ranks: Sequence[int] | None = None) -> np.ndarray:
    """(candidates, len(FEATURE_NAMES)) recorded features of a receipt's candidates."""
    floats = projection.float_block()
    ints = projection.int_block()
    n = floats.shape[1]
    idx = np.arange(n) if ranks is None else np.asarray(ranks, dtype=np.int64)
    node_ids = projection.node_ids.split("\x1f") if n else []
    base_ids = projection.base_node_ids.split("\x1f") if n else []
    inherited = np.array([node_ids[i] != base_ids[i] for i in idx], dtype=np.float64)
    columns = [floats[_FLOAT_INDEX[name]][idx] for name in _RECORDED]
    columns.append(ints[INT_COLUMNS.index("rank")][idx].astype(np.float64))
    columns.append(inherited)
    return np.column_stack(columns) if idx.size else np.zeros((0, len(FEATURE_NAMES)))


def feature_rerank(receipt: RetrievalReceipt, feature: str) -> list[UUID]:
    """The receipt's candidates ordered by one recorded feature (ties keep the recorded order)."""
    values = candidate_features(packed_projection(receipt))[:, FEATURE_NAMES.index(feature)]
    order = np.lexsort((np.arange(values.size), -values))
    nodes = receipt_order(receipt)
    return [nodes[i] for i in order]


@dataclass
class JudgedRequests:
    """The learner's judged candidates per request: features, labels, group and split."""

    features: list[np.ndarray]
    labels: list[np.ndarray]
    groups: list[str]
    validation: list[bool]


def judged_requests(prepared: Prepared, snapshot: FeedbackSnapshot) -> JudgedRequests:
    out = JudgedRequests([], [], [], [])
    for request in prepared.requests:
        ranks = request.positives + request.negatives  # the order ``observations`` uses
        projection = snapshot.receipts[request.request_id].projection
        out.features.append(candidate_features(projection, ranks))
        out.labels.append(np.array([1] * len(request.positives) + [0] * len(request.negatives)))
        out.groups.append(request.group)
        out.validation.append(request.validation)
    return out


def _judged_ndcg(scores: np.ndarray, labels: np.ndarray, recorded_rank: np.ndarray, k: int) -> float:
    """NDCG@k among one request's judged candidates (ties keep the recorded order)."""
    return ndcg_at_k(labels[np.lexsort((recorded_rank, -scores))].astype(bool), int(labels.sum()), k)


def lambdarank_challenger(data: JudgedRequests, trials: Sequence[Trial], *, k: int, seed: int) -> dict[str, Any]:
    """Train LambdaRank on the training groups' judged candidates; report its judged NDCG gain on
    the validation groups (the offline gate's measure) and its holdout rankings."""
    try:
        import lightgbm
    except ImportError:
        return {"status": "lightgbm is not installed (pip install -e '.[bench]')", "rankings": None}

    # Requests in an order fixed by their content: ``prepared.requests`` is sorted by request id,
    # a random UUID per run, and LightGBM's trees depend on row order (the same data in another
    # order gave conv-43 a validation gain of −0.012 in one run and +0.015 in the next).
    train = sorted(
        (i for i, v in enumerate(data.validation) if not v),
        key=lambda i: (data.groups[i], data.features[i].tobytes(), data.labels[i].tobytes()),
    )
    if not train or not any(data.labels[i].any() for i in train):
        return {"status": "no training requests", "rankings": None}
    # LightGBM's own training API (its scikit-learn wrapper would need scikit-learn as well).
    params = {**LAMBDARANK_PARAMS, "seed": seed}
    dataset = lightgbm.Dataset(
        np.vstack([data.features[i] for i in train]),
        label=np.concatenate([data.labels[i] for i in train]).astype(np.float64),
        group=[len(data.labels[i]) for i in train],
        params={"verbose": -1},
    )
    model = lightgbm.train(params, dataset, num_boost_round=LAMBDARANK_ROUNDS)
    rank_col = FEATURE_NAMES.index("rank")
    per_group: dict[str, list[tuple[float, float]]] = {}
    for i, is_validation in enumerate(data.validation):
        if not is_validation:
            continue
        f, y = data.features[i], data.labels[i]
        base = _judged_ndcg(-f[:, rank_col], y, f[:, rank_col], k)
        cand = _judged_ndcg(model.predict(f), y, f[:, rank_col], k)
        per_group.setdefault(data.groups[i], []).append((base, cand))
    diffs = [float(np.mean(sorted(c - b for b, c in v))) for _, v in sorted(per_group.items())]
    rankings = []
    for trial in trials:
        projection = packed_projection(trial.baseline)
        scores = model.predict(candidate_features(projection)) if trial.baseline.candidates else np.zeros(0)
        order = np.lexsort((np.arange(scores.size), -scores))
        nodes = receipt_order(trial.baseline)
        rankings.append([nodes[i] for i in order])
    importance = dict(zip(FEATURE_NAMES, (int(v) for v in model.feature_importance("gain"))))
    return {
        "status": "trained",
        "training_requests": len(train),
        "training_rows": int(sum(len(data.labels[i]) for i in train)),
        "validation_groups": len(diffs),
        "validation_ndcg_gain": float(np.mean(diffs)) if diffs else None,
        "feature_gain": importance,
        "params": {**params, "rounds": LAMBDARANK_ROUNDS},
        "rankings": rankings,
    }


def pool_rerank(trials: Sequence[Trial], multipliers: RankingMultipliers) -> list[list[UUID]]:
    """Each baseline pool re-ranked under ``multipliers`` (over the configured scoring): what a
    fresh retrieval with them returns (the baseline receipts must be read with their pools)."""
    return [list(replay_pool(t.baseline, multipliers=multipliers).node_ids) for t in trials]


ORACLE_STARTS = 64


def family_oracle(
    trials: Sequence[Trial], *, k: int, seed: int, apply_to: Sequence[Trial] | None = None
) -> dict[str, Any]:
    """The family-2 adjustment that maximizes group-mean NDCG@k on ``trials`` against their
    complete relevant sets (pool replay of each trial's baseline arm, the fit's own search with
    more starts and no regularization), and its rankings of ``apply_to`` (default: the same
    trials). On the holdout trials it is the most any profile of the family could gain there; on
    the feedback questions it shows what a learner of the family could take from them even with
    perfect labels. With no trials to choose on it keeps unity (and says so)."""
    if not trials:
        return {
            "status": "no trials to choose on: unity kept",
            "multipliers": RankingMultipliers().model_dump(),
            "chosen_on": 0,
            "ndcg_at_identity": None,
            "ndcg": None,
            "search_evaluations": 0,
            "rankings": pool_rerank(apply_to or (), RankingMultipliers()),
        }
    requests, groups = [], {}
    for t in trials:
        columns = t.baseline.pool_columns()
        items = {u.bytes for u in (*columns.node_ids, *columns.outside_ids)}
        positives = tuple(n.bytes for n in sorted(t.relevant) if n.bytes in items)
        requests.append(PoolRequest(columns, positives, (), relevant_total=len(t.relevant)))
        groups.setdefault(t.group_id, len(groups))
    pools = PoolSet(requests)
    objective = PoolObjective(
        pools,
        np.array([groups[t.group_id] for t in trials], dtype=np.int64),
        algorithm=POOL_NDCG_ALGORITHM,
        k=k,
        regularization=0.0,
        margin_scale=1.0,
        base_interactions=trials[0].baseline.scoring.interaction_vector(),
    )
    found = search(objective, family=FAMILY_V2, seed=seed, starts=ORACLE_STARTS, passes_per_step=4)
    multipliers = found.parameters.adjustment()
    return {
        "multipliers": multipliers.model_dump(),
        "chosen_on": len(groups),
        "ndcg_at_identity": found.value_at_identity,
        "ndcg": found.value,
        "search_evaluations": found.evaluations,
        "rankings": pool_rerank(trials if apply_to is None else apply_to, multipliers),
    }


def feedback_trials(client: Any, conversation: Any, questions: Sequence[Any], *, owner: str, limit: int) -> list[Trial]:
    """The owner's recorded feedback retrievals as trials judged against each question's complete
    evidence set (more than production feedback ever knows: every relevant turn, returned or not)."""
    out = []
    for question in questions:
        record = client.get_relevance(feedback_id(conversation, question), owner)
        if record is None:
            continue
        relevant = frozenset(conversation.resolve(question)[0])
        if not relevant:
            continue
        receipt = client.get_receipt(record.request_id, owner, with_pool=True)
        if receipt.result_limit != limit:
            continue
        out.append(Trial(group_id(normalize_query(question.question)), receipt.query, relevant, receipt, receipt))
    return out


POOL_FEATURES = (*TRACE_FEATURES, "path_score", "base_score", "base_position")
"""What the pool LambdaRank sees per pool member: its trace features, its path score, and its
formula-1 base score and position in the pool's base order under the recorded weights (as the
receipt-candidate challenger sees the recorded score and rank): the model is trained on the
judged members, which sit at the top of that order, and ranks every member."""


def _pool_features(columns: Any) -> np.ndarray:
    if not columns.members:
        return np.zeros((0, len(POOL_FEATURES)))
    masks = columns.paths.astype(np.int64)
    path = np.minimum(((masks & 1) + ((masks >> 1) & 1) + ((masks >> 2) & 1)) / 3.0, 1.0)
    replay = columns.replay
    scoring = ScoringWeights.model_validate(replay["scoring"])
    shifted, _ = redistribute(scoring, current=replay["current_state"], episodic=replay["episodic"])
    recorded = replay["multipliers"]
    applied = adjusted_weights(shifted, None if recorded is None else RankingMultipliers.model_validate(recorded))
    base = formula_scores(scored_pool(columns), applied)
    position = np.arange(columns.members, dtype=np.float64)  # members are recorded in base order
    return np.column_stack([columns.features, path, base, position])


def pool_lambdarank(prepared: Prepared, trials: Sequence[Trial], *, k: int, seed: int) -> dict[str, Any]:
    """LambdaRank trained on the training requests' pools (judged members only; a judged
    candidate outside its pool — an inherited neighbour — has no features there and is left
    out) and applied to every member of each baseline pool (ties keep the base order)."""
    try:
        import lightgbm
    except ImportError:
        return {"status": "lightgbm is not installed (pip install -e '.[bench]')", "rankings": None}
    rows, labels, sizes, keys = [], [], [], []
    for i in prepared.fit_requests:
        request = prepared.pools[i]
        columns = request.columns
        at = {columns.node_bytes[16 * j : 16 * j + 16]: j for j in range(columns.members)}
        judged = [(at[n], 1) for n in request.positives if n in at] + [(at[n], 0) for n in request.negatives if n in at]
        if not judged or not any(y for _, y in judged):
            continue
        features = _pool_features(columns)
        rows.append(features[[j for j, _ in judged]])
        labels.append(np.array([y for _, y in judged], dtype=np.float64))
        sizes.append(len(judged))
        keys.append((prepared.requests[i].group, rows[-1].tobytes(), labels[-1].tobytes()))
    if not rows:
        return {"status": "no training requests with judged pool members", "rankings": None}
    order = sorted(range(len(rows)), key=keys.__getitem__)  # a content-fixed order (see lambdarank_challenger)
    params = {**LAMBDARANK_PARAMS, "seed": seed}
    dataset = lightgbm.Dataset(
        np.vstack([rows[i] for i in order]),
        label=np.concatenate([labels[i] for i in order]),
        group=[sizes[i] for i in order],
        params={"verbose": -1},
    )
    model = lightgbm.train(params, dataset, num_boost_round=LAMBDARANK_ROUNDS)
    rankings = []
    for trial in trials:
        columns = trial.baseline.pool_columns()
        scores = model.predict(_pool_features(columns)) if columns.members else np.zeros(0)
        ranked = np.lexsort((np.arange(scores.size), -scores))[:k]  # pool members are in base order
        ids = columns.node_ids
        rankings.append([ids[j] for j in ranked])
    return {
        "status": "trained",
        "training_requests": len(rows),
        "training_rows": int(sum(sizes)),
        "feature_gain": dict(zip(POOL_FEATURES, (int(v) for v in model.feature_importance("gain")))),
        "params": {**params, "rounds": LAMBDARANK_ROUNDS},
        "rankings": rankings,
    }


def compare(trials: Sequence[Trial], rankings: Mapping[str, Sequence[Sequence[UUID]]], k: int) -> dict[str, Any]:
    return {name: judge(trials, r, k) for name, r in rankings.items() if r is not None}
