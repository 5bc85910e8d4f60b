"""From a feedback snapshot to judged observations: validation, exclusions, groups, split.

Every record is validated before anything is fitted (its receipt exists, the checksums agree,
each label names a receipt member, context labels name included entries and positive ones
content-bearing entries); any failure raises. Then, per record and in this order, records of
another surface, another scope set, a version-1 receipt or a rank-fused receipt are excluded and
counted. Surviving labels are pooled per request as vote sets: a candidate labelled both ways is
excluded and counted, repeats collapse (retries and duplicates are not extra votes), and an
unlabelled candidate is never a negative. A request needs at least one positive and one negative.

The judged candidates of the surviving requests become flat numpy arrays (features, applied
weights, recorded scores, recorded operations as layers, sort-policy keys) so that proposals,
losses and metrics are computed for all requests at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import numpy as np

from prme_core.canonical import parse_json
from prme_core.errors import InvalidInput, PrmeError
from prme_core.learning.config import LearningConfig
from prme_core.learning.snapshot import FeedbackSnapshot, MissingEvidence
from prme_core.learning.split import group_id, is_validation, query_digest
from prme_core.receipts.projection import scope_key as make_scope_key
from prme_core.retrieval.text import normalize_query
from prme_core.validation import check_owner

EXCLUSION_KEYS = ("other_surface_records", "other_scope_records", "legacy_receipt_records",
                  "rank_fusion_receipt_records", "conflicting_candidate_labels", "requests_without_explicit_pairs")
_FEATURES = ("f_semantic", "f_lexical", "f_graph", "f_recency", "f_salience", "f_confidence",
             "f_epistemic_weight", "f_temporal_affinity", "f_node_type_boost")
_WEIGHTS = ("w_semantic", "w_lexical", "w_graph", "w_recency", "w_salience", "w_confidence")
_POLICY_CODES = {"score_path_id": 0, "reranked_prefix": 1, "score_id": 2}
_BLEND, _MULTIPLY = 1, 2


class InvalidEvidence(PrmeError, ValueError):
    """A relevance record does not fit its receipt; nothing was fitted."""


class PairBudgetExceeded(PrmeError, ValueError):
    """A request has more explicit pairs than ``max_pairs_per_request`` (nothing is sampled)."""


@dataclass
class Request:
    request_id: UUID
    group: str
    validation: bool
    positives: list[int]  # receipt ranks of unambiguous positives
    negatives: list[int]


@dataclass
class Group:
    group_id: str
    validation: bool
    requests: list[int] = field(default_factory=list)  # indices into Prepared.requests
    query_digests: set[str] = field(default_factory=set)


@dataclass
class Layer:
    """One position of recorded post-score operations, across all judged candidates."""

    kind: np.ndarray  # 0 none, 1 neural blend, 2 multiply
    coefficient: np.ndarray
    neural: np.ndarray


@dataclass
class Judged:
    """Flat arrays over judged candidates (rows grouped by request, in request order)."""

    request: np.ndarray
    positive: np.ndarray
    features: np.ndarray
    weights: np.ndarray
    scalars: np.ndarray
    recorded_base: np.ndarray
    recorded: np.ndarray
    path: np.ndarray
    reranked: np.ndarray
    policy: np.ndarray
    id_high: np.ndarray
    id_low: np.ndarray
    layers: list[Layer]
    pair_positive: np.ndarray  # row indices of each explicit pair's positive
    pair_negative: np.ndarray
    pair_request: np.ndarray

    @property
    def size(self) -> int:
        return int(self.request.size)

    def subset(self, requests: np.ndarray) -> "Judged":
        """The rows of the given request indices, re-indexed 0..len(requests)-1 (e.g. training)."""
        request_map = np.full(int(self.request.max(initial=-1)) + 1, -1, dtype=np.int64)
        request_map[requests] = np.arange(requests.size)
        keep = request_map[self.request] >= 0 if self.size else np.zeros(0, dtype=bool)
        index = np.flatnonzero(keep)
        row_map = np.full(self.size, -1, dtype=np.int64)
        row_map[index] = np.arange(index.size)
        pair_keep = keep[self.pair_positive] if self.pair_positive.size else np.zeros(0, dtype=bool)
        return Judged(
            request=request_map[self.request[index]], positive=self.positive[index], features=self.features[index],
            weights=self.weights[index], scalars=self.scalars[index], recorded_base=self.recorded_base[index],
            recorded=self.recorded[index], path=self.path[index], reranked=self.reranked[index],
            policy=self.policy[index], id_high=self.id_high[index], id_low=self.id_low[index],
            layers=[Layer(layer.kind[index], layer.coefficient[index], layer.neural[index]) for layer in self.layers],
            pair_positive=row_map[self.pair_positive[pair_keep]], pair_negative=row_map[self.pair_negative[pair_keep]],
            pair_request=request_map[self.pair_request[pair_keep]],
        )


@dataclass
class Prepared:
    owner: str
    scopes: tuple[str, ...]
    surface: str
    config: LearningConfig
    query_groups: dict[str, str]
    snapshot_sha256: str
    feedback_ids: tuple[UUID, ...]
    receipt_checksums: dict[str, str]
    exclusions: dict[str, int]
    requests: list[Request]
    groups: dict[str, Group]
    judged: Judged

    @property
    def explicit_pairs(self) -> int:
        return int(self.judged.pair_positive.size)

    def split_groups(self, validation: bool) -> list[str]:
        return sorted(g for g, info in self.groups.items() if info.validation == validation)


def normalize_scopes(scopes: Any) -> tuple[str, ...]:
    if isinstance(scopes, str):
        scopes = (scopes,)
    if not isinstance(scopes, (list, tuple, set, frozenset)) or not scopes or not all(isinstance(s, str) for s in scopes):
        raise InvalidInput("scopes", "must be a non-empty list of scope names (the exact scope set to learn for)")
    return tuple(sorted(set(scopes)))


def _query_groups(query_groups: Mapping[Any, Any] | None, snapshot: FeedbackSnapshot) -> dict[str, str]:
    if not query_groups:
        return {}
    out: dict[str, str] = {}
    for key, name in query_groups.items():
        try:
            request = UUID(str(key))
        except ValueError:
            raise InvalidInput("query_groups", f"key {key!r} is not a request id") from None
        if request not in snapshot.receipts:
            raise InvalidInput("query_groups", f"request {request} is not a receipt of this snapshot")
        if not isinstance(name, str) or not name.strip() or len(name) > 512:
            raise InvalidInput("query_groups", f"group name for {request} must be a non-blank string of ≤ 512 characters")
        out[str(request)] = name
    return dict(sorted(out.items()))


def prepare(snapshot: FeedbackSnapshot, *, owner: Any, scopes: Any, surface: Any = "results",
            config: LearningConfig | None = None, query_groups: Mapping[Any, Any] | None = None) -> Prepared:
    owner = check_owner(owner)
    if owner != snapshot.owner:
        raise InvalidInput("owner", "the snapshot belongs to another owner")
    if surface not in ("results", "context"):
        raise InvalidInput("surface", f"must be 'results' or 'context', got {surface!r}")
    scopes = normalize_scopes(scopes)
    wanted_scope = make_scope_key(scopes)
    config = config or LearningConfig()
    groups_by_request = _query_groups(query_groups, snapshot)

    _validate_records(snapshot, owner)
    exclusions = dict.fromkeys(EXCLUSION_KEYS, 0)
    votes: dict[UUID, dict[int, set[bool]]] = {}
    for record in snapshot.records:
        header = snapshot.receipts[record.request_id].header
        if record.surface != surface:
            exclusions["other_surface_records"] += 1
        elif header["scope_key"] != wanted_scope:
            exclusions["other_scope_records"] += 1
        elif header["schema_version"] < 2:
            exclusions["legacy_receipt_records"] += 1
        elif header["fusion"] != "weighted":
            exclusions["rank_fusion_receipt_records"] += 1
        else:
            ranks = _rank_of(snapshot, record.request_id)
            pooled = votes.setdefault(record.request_id, {})
            for node, value in record.labels.items():
                pooled.setdefault(ranks[str(node)], set()).add(value)

    explicit_names = _explicit_groups(snapshot, groups_by_request)
    requests: list[Request] = []
    groups: dict[str, Group] = {}
    for request_id in sorted(votes, key=str):
        pooled = votes[request_id]
        conflicting = [r for r, v in pooled.items() if len(v) > 1]
        exclusions["conflicting_candidate_labels"] += len(conflicting)
        positives = sorted(r for r, v in pooled.items() if v == {True})
        negatives = sorted(r for r, v in pooled.items() if v == {False})
        if not positives or not negatives:
            exclusions["requests_without_explicit_pairs"] += 1
            continue
        if len(positives) * len(negatives) > config.max_pairs_per_request:
            raise PairBudgetExceeded(
                f"request {request_id} has {len(positives) * len(negatives)} explicit pairs; max_pairs_per_request "
                f"is {config.max_pairs_per_request} (raise it — pairs are never sampled)")
        query = snapshot.receipts[request_id].header["query"]
        normalized = normalize_query(query)
        gid = group_id(normalized, explicit_names.get(normalized))
        info = groups.get(gid)
        if info is None:
            info = groups[gid] = Group(gid, is_validation(gid, seed=config.seed,
                                                          validation_fraction=config.validation_fraction))
        info.requests.append(len(requests))
        info.query_digests.add(query_digest(query))
        requests.append(Request(request_id, gid, info.validation, positives, negatives))

    return Prepared(
        owner=owner, scopes=scopes, surface=surface, config=config, query_groups=groups_by_request,
        snapshot_sha256=snapshot.snapshot_sha256, feedback_ids=tuple(r.feedback_id for r in snapshot.records),
        receipt_checksums={str(k): v.checksum for k, v in sorted(snapshot.receipts.items(), key=lambda kv: str(kv[0]))},
        exclusions={k: v for k, v in exclusions.items() if v}, requests=requests, groups=groups,
        judged=_judged_arrays(snapshot, requests),
    )


def _rank_of(snapshot: FeedbackSnapshot, request_id: UUID) -> dict[str, int]:
    ids = snapshot.receipts[request_id].arrays()["node_id"]
    return {node: i for i, node in enumerate(ids)}


def _validate_records(snapshot: FeedbackSnapshot, owner: str) -> None:
    for record in snapshot.records:
        if record.owner != owner:
            raise InvalidEvidence(f"relevance record {record.feedback_id} belongs to another owner")
        evidence = snapshot.receipts.get(record.request_id)
        if evidence is None:
            raise MissingEvidence(f"relevance record {record.feedback_id} requires its saved receipt "
                                  f"{record.request_id}, which the snapshot does not hold")
        if evidence.checksum != record.receipt_checksum:
            raise InvalidEvidence(f"relevance record {record.feedback_id} was bound to a different receipt checksum "
                                  "than the stored receipt; the evidence cannot be used")
        cols = evidence.arrays()
        ranks = _rank_of(snapshot, record.request_id)
        for node, positive in record.labels.items():
            rank = ranks.get(str(node))
            if rank is None:
                raise InvalidEvidence(f"relevance record {record.feedback_id} labels {node}, which is not a "
                                      "candidate of its receipt")
            if record.surface == "context" and (not cols["in_context"][rank] or (positive and not cols["has_content"][rank])):
                raise InvalidEvidence(f"relevance record {record.feedback_id}: context labels need included entries "
                                      "and positive ones need content-bearing entries")


def _explicit_groups(snapshot: FeedbackSnapshot, groups_by_request: dict[str, str]) -> dict[str, str]:
    """normalized query → explicit group name; one normalized query cannot take two names."""
    names: dict[str, str] = {}
    for request, name in groups_by_request.items():
        normalized = normalize_query(snapshot.receipts[UUID(request)].header["query"])
        if names.setdefault(normalized, name) != name:
            raise InvalidInput("query_groups", "repeated queries cannot use different query groups "
                               f"({names[normalized]!r} and {name!r} for the same normalized query)")
    return names


def _judged_arrays(snapshot: FeedbackSnapshot, requests: Sequence[Request]) -> Judged:
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("request", "positive", "features", "weights", "scalars",
                                                        "recorded_base", "recorded", "path", "reranked", "policy")}
    ids: list[str] = []
    ops: list[list[dict[str, Any]]] = []
    pairs_p, pairs_n, pairs_r = [], [], []
    offset = 0
    for index, req in enumerate(requests):
        evidence = snapshot.receipts[req.request_id]
        cols = evidence.arrays()
        ranks = np.array(req.positives + req.negatives, dtype=np.int64)
        n = ranks.size
        parts["request"].append(np.full(n, index, dtype=np.int64))
        parts["positive"].append(np.arange(n) < len(req.positives))
        parts["features"].append(np.stack([cols[c][ranks] for c in _FEATURES], axis=1))
        parts["weights"].append(np.stack([cols[c][ranks] for c in _WEIGHTS], axis=1))
        parts["scalars"].append(np.stack([cols["w_temporal_boost"][ranks], cols["w_relevance_floor"][ranks]], axis=1))
        parts["recorded_base"].append(cols["f_base_score"][ranks])
        parts["recorded"].append(cols["score"][ranks])
        parts["path"].append(cols["f_path_score"][ranks])
        parts["reranked"].append(~np.isnan(cols["reranker_score"][ranks]))
        parts["policy"].append(np.full(n, _POLICY_CODES[evidence.header["ranking_policy"]], dtype=np.int64))
        node_ids, adjustments = cols["node_id"], cols["adjustments"]
        for r in ranks:
            ids.append(node_ids[r])
            ops.append(parse_json(adjustments[r]) if adjustments[r] != "[]" else [])
        p = np.arange(len(req.positives)) + offset
        q = np.arange(len(req.positives), n) + offset
        pairs_p.append(np.repeat(p, q.size))
        pairs_n.append(np.tile(q, p.size))
        pairs_r.append(np.full(p.size * q.size, index, dtype=np.int64))
        offset += n
    if not requests:
        empty = np.zeros(0)
        return Judged(np.zeros(0, np.int64), np.zeros(0, bool), np.zeros((0, 9)), np.zeros((0, 6)), np.zeros((0, 2)),
                      empty, empty, empty, np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0, np.uint64),
                      np.zeros(0, np.uint64), [], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    raw = np.frombuffer(bytes.fromhex("".join(i.replace("-", "") for i in ids)), dtype=">u8").reshape(-1, 2)
    return Judged(
        request=np.concatenate(parts["request"]), positive=np.concatenate(parts["positive"]),
        features=np.concatenate(parts["features"]), weights=np.concatenate(parts["weights"]),
        scalars=np.concatenate(parts["scalars"]), recorded_base=np.concatenate(parts["recorded_base"]),
        recorded=np.concatenate(parts["recorded"]), path=np.concatenate(parts["path"]),
        reranked=np.concatenate(parts["reranked"]), policy=np.concatenate(parts["policy"]),
        id_high=raw[:, 0].astype(np.uint64), id_low=raw[:, 1].astype(np.uint64), layers=_layers(ops),
        pair_positive=np.concatenate(pairs_p), pair_negative=np.concatenate(pairs_n), pair_request=np.concatenate(pairs_r),
    )


def _layers(ops: list[list[dict[str, Any]]]) -> list[Layer]:
    depth = max((len(o) for o in ops), default=0)
    layers = []
    for level in range(depth):
        kind = np.zeros(len(ops), dtype=np.int64)
        coefficient = np.ones(len(ops), dtype=np.float64)
        neural = np.zeros(len(ops), dtype=np.float64)
        for row, seq in enumerate(ops):
            if level < len(seq):
                op = seq[level]
                kind[row] = _BLEND if op["kind"] == "neural_blend" else _MULTIPLY
                coefficient[row] = op["coefficient"]
                neural[row] = op.get("neural_score", 0.0)
        layers.append(Layer(kind, coefficient, neural))
    return layers
