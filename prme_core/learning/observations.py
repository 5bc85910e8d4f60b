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
losses and metrics are computed for all requests at once. Arrays use the current feature layout:
version-10 receipts bring their interaction features and weights, older ones zeros (what they
meant); the multipliers adjust only the six weights and the interaction weights stay as recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from prme_core.canonical import parse_json
from prme_core.errors import InvalidEvidence, InvalidInput, MissingEvidence, PairBudgetExceeded
from prme_core.features import (
    ADDITIVE_WEIGHT_COLUMNS,
    CURRENT_LAYOUT,
    SCALAR_WEIGHT_COLUMNS,
    TRACE_FEATURE_COLUMNS,
    FeatureLayout,
)
from prme_core.gcpause import cyclic_gc_paused
from prme_core.learning.config import LearningConfig
from prme_core.learning.pool_ranking import PoolRequest
from prme_core.learning.snapshot import FeedbackSnapshot
from prme_core.learning.split import fit_sample, group_id, group_sample, is_validation, query_digest
from prme_core.receipts.model import PROVENANCE_SINCE
from prme_core.receipts.projection import FLOAT_COLUMNS
from prme_core.receipts.projection import scope_key as make_scope_key
from prme_core.receipts.versions import PACKED_POOL_SINCE
from prme_core.retrieval.text import normalize_query
from prme_core.validation import check_owner, check_query_groups, check_scope_set

EXCLUSION_KEYS = (
    "other_surface_records",
    "other_scope_records",
    "legacy_receipt_records",
    "rank_fusion_receipt_records",
    "conflicting_candidate_labels",
    "requests_without_explicit_pairs",
    "requests_without_replayable_pool",
)
FitPath = Literal["pool", "judged"]
_POLICY_CODES = {"score_path_id": 0, "reranked_prefix": 1, "score_id": 2}
_BLEND, _MULTIPLY = 1, 2


@dataclass
class Request:
    request_id: str
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
    id_key: np.ndarray  # tie-break order of the node id among its request's judged candidates
    layers: list[Layer]
    pair_positive: np.ndarray  # row indices of each explicit pair's positive
    pair_negative: np.ndarray
    pair_request: np.ndarray
    layout: FeatureLayout = CURRENT_LAYOUT  # of ``features`` and ``weights`` (projections are remapped to it)

    @property
    def size(self) -> int:
        return int(self.request.size)

    def weight_sets(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(distinct applied weight rows, index of each row's set — None when all rows share
        one set, the usual case). Lets a proposal renormalize each distinct set once."""
        cached = getattr(self, "_sets", None)
        if cached is None:
            if self.size == 0 or bool(np.all(self.weights == self.weights[0])):
                cached = (self.weights[:1], None)
            else:
                sets, index = np.unique(self.weights, axis=0, return_inverse=True)
                cached = (sets, index.reshape(-1))
            object.__setattr__(self, "_sets", cached)
        return cached

    def subset(self, requests: np.ndarray) -> Judged:
        """The rows of the given request indices, re-indexed 0..len(requests)-1 (e.g. training)."""
        request_map = np.full(int(self.request.max(initial=-1)) + 1, -1, dtype=np.int64)
        request_map[requests] = np.arange(requests.size)
        keep = request_map[self.request] >= 0 if self.size else np.zeros(0, dtype=bool)
        index = np.flatnonzero(keep)
        row_map = np.full(self.size, -1, dtype=np.int64)
        row_map[index] = np.arange(index.size)
        pair_keep = keep[self.pair_positive] if self.pair_positive.size else np.zeros(0, dtype=bool)
        return Judged(
            request=request_map[self.request[index]],
            positive=self.positive[index],
            features=self.features[index],
            weights=self.weights[index],
            scalars=self.scalars[index],
            recorded_base=self.recorded_base[index],
            recorded=self.recorded[index],
            path=self.path[index],
            reranked=self.reranked[index],
            policy=self.policy[index],
            id_key=self.id_key[index],
            layers=[Layer(layer.kind[index], layer.coefficient[index], layer.neural[index]) for layer in self.layers],
            pair_positive=row_map[self.pair_positive[pair_keep]],
            pair_negative=row_map[self.pair_negative[pair_keep]],
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
    feedback_ids: tuple[str, ...]
    receipt_checksums: dict[str, str]
    exclusions: dict[str, int]
    requests: list[Request]
    groups: dict[str, Group]
    judged: Judged
    path: FitPath = "judged"
    path_reason: str = ""
    pools: dict[int, PoolRequest] = field(default_factory=dict)
    """Pool path: the recorded pool and labels of every request that is used — the validation
    requests measured (up to ``max_group_requests`` a group) and the training requests the fit
    re-ranks (``fit_requests``) — by request index."""
    fit_requests: list[int] = field(default_factory=list)
    """Pool path: indices of the training requests the fit re-ranks (all of them, or a
    deterministic sample of ``LearningConfig.max_fit_requests`` spread over the groups)."""
    returned: dict[int, tuple[tuple[bytes, ...], tuple[float, ...]]] = field(default_factory=dict)
    """Pool path: the recorded returned list (ids, scores) of each request in ``pools``."""

    @property
    def explicit_pairs(self) -> int:
        return sum(len(r.positives) * len(r.negatives) for r in self.requests)

    def split_groups(self, validation: bool) -> list[str]:
        return sorted(g for g, info in self.groups.items() if info.validation == validation)


def _query_groups(query_groups: Mapping[Any, Any] | None, snapshot: FeedbackSnapshot) -> dict[str, str]:
    groups = check_query_groups(query_groups)
    absent = next((request for request in groups if request not in snapshot.receipts), None)
    if absent is not None:
        raise InvalidInput("query_groups", f"request {absent} is not a receipt of this snapshot")
    return dict(sorted(groups.items()))


@cyclic_gc_paused()
def prepare(
    snapshot: FeedbackSnapshot,
    *,
    owner: Any,
    scopes: Any,
    surface: Any = "results",
    config: LearningConfig | None = None,
    query_groups: Mapping[Any, Any] | None = None,
) -> Prepared:
    owner = check_owner(owner)
    if owner != snapshot.owner:
        raise InvalidInput("owner", "the snapshot belongs to another owner")
    if surface not in ("results", "context"):
        raise InvalidInput("surface", f"must be 'results' or 'context', got {surface!r}")
    scopes = check_scope_set(scopes)
    wanted_scope = make_scope_key(scopes)
    config = (config or LearningConfig()).resolved()
    groups_by_request = _query_groups(query_groups, snapshot)

    exclusions = dict.fromkeys(EXCLUSION_KEYS, 0)
    votes: dict[str, tuple[set[int], set[int]]] = {}  # request → (ranks voted true, ranks voted false)
    for record in snapshot.records:
        ranked = _validated_labels(snapshot, record, owner)  # every record, before any exclusion
        header = snapshot.receipts[record.request_id].header
        if record.surface != surface:
            exclusions["other_surface_records"] += 1
        elif header["scope_key"] != wanted_scope:
            exclusions["other_scope_records"] += 1
        elif header["schema_version"] < PROVENANCE_SINCE:
            exclusions["legacy_receipt_records"] += 1
        elif header["fusion"] != "weighted":
            exclusions["rank_fusion_receipt_records"] += 1
        else:
            true_votes, false_votes = votes.setdefault(record.request_id, (set(), set()))
            for rank, value in ranked:
                (true_votes if value else false_votes).add(rank)

    explicit_names = _explicit_groups(snapshot, groups_by_request)
    requests: list[Request] = []
    groups: dict[str, Group] = {}
    group_of_query: dict[str, tuple[str, str]] = {}
    for request_id in sorted(votes):
        true_votes, false_votes = votes[request_id]
        conflicting = true_votes & false_votes
        exclusions["conflicting_candidate_labels"] += len(conflicting)
        positives = sorted(true_votes - conflicting)
        negatives = sorted(false_votes - conflicting)
        if not positives or not negatives:
            exclusions["requests_without_explicit_pairs"] += 1
            continue
        if len(positives) * len(negatives) > config.max_pairs_per_request:
            raise PairBudgetExceeded(
                f"request {request_id} has {len(positives) * len(negatives)} explicit pairs; max_pairs_per_request "
                f"is {config.max_pairs_per_request} (raise it — pairs are never sampled)"
            )
        query = snapshot.receipts[request_id].header["query"]
        known = group_of_query.get(query)
        if known is None:
            normalized = normalize_query(query)
            known = group_of_query[query] = (group_id(normalized, explicit_names.get(normalized)), query_digest(query))
        gid, digest = known
        info = groups.get(gid)
        if info is None:
            info = groups[gid] = Group(
                gid, is_validation(gid, seed=config.seed, validation_fraction=config.validation_fraction)
            )
        info.requests.append(len(requests))
        info.query_digests.add(digest)
        requests.append(Request(request_id, gid, info.validation, positives, negatives))

    path, reason, eligible, inline = _fit_path(snapshot, requests, config, exclusions)
    pools: dict[int, PoolRequest] = {}
    sample: list[int] = []
    if path == "pool":
        requests, groups = _keep(requests, groups, eligible)
        training = [i for i, r in enumerate(requests) if not r.validation]
        group_order = {g: k for k, g in enumerate(sorted(groups))}
        sample = [
            training[j]
            for j in fit_sample(
                [requests[i].request_id for i in training],
                [group_order[requests[i].group] for i in training],
                limit=config.max_fit_requests,
                seed=config.seed,
            )
        ]
        measured = [
            info.requests[j]
            for _, info in sorted(groups.items())
            if info.validation
            for j in group_sample(
                [requests[i].request_id for i in info.requests], limit=config.max_group_requests, seed=config.seed
            )
        ]
        used = sorted(set(measured) | set(sample))
        wanted = [requests[i].request_id for i in used if requests[i].request_id not in inline]
        loaded = {**inline, **(snapshot.pools(wanted) if wanted else {})}
        pools = {i: _pool_request(snapshot, requests[i], loaded[requests[i].request_id]) for i in used}
    judged = _judged_arrays(snapshot, requests if path == "judged" else [])
    return Prepared(
        owner=owner,
        scopes=scopes,
        surface=surface,
        config=config,
        query_groups=groups_by_request,
        snapshot_sha256=snapshot.snapshot_sha256,
        feedback_ids=tuple(r.feedback_id for r in snapshot.records),
        receipt_checksums={k: v.checksum for k, v in sorted(snapshot.receipts.items())},
        exclusions={k: v for k, v in exclusions.items() if v},
        requests=requests,
        groups=groups,
        judged=judged,
        path=path,
        path_reason=reason,
        pools=pools,
        fit_requests=sample,
        returned={i: _returned(snapshot, requests[i].request_id) for i in pools},
    )


def _fit_path(
    snapshot: FeedbackSnapshot, requests: list[Request], config: LearningConfig, exclusions: dict[str, int]
) -> tuple[FitPath, str, set[str], dict[str, Any]]:
    """Which fit the requests support (``LearningConfig.fit``), why, the requests with a
    complete, replayable pool, and the version-10 pools read to find out (inline pools carry
    their flags; version-11 projections name theirs, so no pool is read for this)."""
    fit = config.fit or "auto"
    if fit == "judged_pairwise":
        return "judged", "fit=judged_pairwise was requested", set(), {}
    possible = [r.request_id for r in requests if snapshot.may_replay_pool(r.request_id)]
    inline_ids = [k for k in possible if int(snapshot.receipts[k].header["schema_version"]) < PACKED_POOL_SINCE]
    inline = {k: c for k, c in (snapshot.pools(inline_ids) if inline_ids else {}).items() if _replayable(c)}
    eligible = {k for k in possible if k not in inline_ids} | set(inline)
    skipped = len(requests) - len(eligible)
    if fit == "auto" and len(eligible) < len(requests) and not _covers(requests, eligible, config):
        train = {r.group for r in requests if r.request_id in eligible and not r.validation}
        validation = {r.group for r in requests if r.request_id in eligible and r.validation}
        return (
            "judged",
            f"{len(eligible)} of {len(requests)} usable requests have a complete, replayable pool "
            f"({len(train)} training and {len(validation)} validation groups, fewer than the "
            f"{config.min_training_queries}/{config.min_validation_queries} a pool fit needs): fitted on "
            "the judged candidates' recorded features instead",
            set(),
            {},
        )
    exclusions["requests_without_replayable_pool"] += skipped
    return (
        "pool",
        f"{len(eligible)} of {len(requests)} usable requests re-ranked from their recorded pools"
        + (f" ({skipped} without a complete, replayable pool excluded)" if skipped else ""),
        eligible,
        inline,
    )


def _covers(requests: list[Request], only: set[str], config: LearningConfig) -> bool:
    """Whether the requests in ``only`` meet both coverage minimums."""
    kept = [r for r in requests if r.request_id in only]
    train = {r.group for r in kept if not r.validation}
    validation = {r.group for r in kept if r.validation}
    return len(train) >= config.min_training_queries and len(validation) >= config.min_validation_queries


def _replayable(columns: Any) -> bool:
    return bool(columns.replay.get("complete") and columns.replay.get("replayable"))


def _keep(requests: list[Request], groups: dict[str, Group], keep: set[str]) -> tuple[list[Request], dict[str, Group]]:
    """The requests in ``keep`` and the groups they form (indices rebuilt)."""
    kept = [r for r in requests if r.request_id in keep]
    rebuilt: dict[str, Group] = {}
    for i, r in enumerate(kept):
        old = groups[r.group]
        info = rebuilt.get(r.group)
        if info is None:
            info = rebuilt[r.group] = Group(r.group, old.validation, [], set(old.query_digests))
        info.requests.append(i)
    return kept, rebuilt


def _uuid_bytes(text: str) -> bytes:
    """A canonical UUID string's 16 bytes (what ``UUID(text).bytes`` gives, without the object)."""
    return bytes.fromhex(text.replace("-", ""))


def _pool_request(snapshot: FeedbackSnapshot, request: Request, columns: Any) -> PoolRequest:
    evidence = snapshot.receipts[request.request_id]
    as_bytes = [_uuid_bytes(n) for n in evidence.node_ids_at(request.positives + request.negatives)]
    split = len(request.positives)
    return PoolRequest(columns, tuple(as_bytes[:split]), tuple(as_bytes[split:]))


def _returned(snapshot: FeedbackSnapshot, request_id: str) -> tuple[tuple[bytes, ...], tuple[float, ...]]:
    evidence = snapshot.receipts[request_id]
    text = evidence.projection.node_ids
    ids = tuple(map(_uuid_bytes, text.split("\x1f"))) if text else ()
    scores = tuple(evidence.projection.float_block()[0].tolist())  # "score" is the first float column
    return ids, scores


def _validated_labels(snapshot: FeedbackSnapshot, record: Any, owner: str) -> list[tuple[int, bool]]:
    """The record's labels as (receipt rank, value) after checking it against its receipt."""
    if record.owner != owner:
        raise InvalidEvidence(f"relevance record {record.feedback_id} belongs to another owner")
    evidence = snapshot.receipts.get(record.request_id)
    if evidence is None:
        raise MissingEvidence(
            f"relevance record {record.feedback_id} requires its saved receipt "
            f"{record.request_id}, which the snapshot does not hold"
        )
    if evidence.checksum != record.receipt_checksum:
        raise InvalidEvidence(
            f"relevance record {record.feedback_id} was bound to a different receipt checksum "
            "than the stored receipt; the evidence cannot be used"
        )
    out = []
    context = record.surface == "context"
    in_context, has_content = evidence.flags() if context else (None, None)
    for (node, positive), rank in zip(record.labels.items(), evidence.ranks_of(record.labels)):
        if rank is None:
            raise InvalidEvidence(
                f"relevance record {record.feedback_id} labels {node}, which is not a candidate of its receipt"
            )
        if context and (not in_context[rank] or (positive and not has_content[rank])):  # type: ignore[index]
            raise InvalidEvidence(
                f"relevance record {record.feedback_id}: context labels need included entries "
                "and positive ones need content-bearing entries"
            )
        out.append((rank, positive))
    return out


def _explicit_groups(snapshot: FeedbackSnapshot, groups_by_request: dict[str, str]) -> dict[str, str]:
    """normalized query → explicit group name; one normalized query cannot take two names."""
    names: dict[str, str] = {}
    for request, name in groups_by_request.items():
        normalized = normalize_query(snapshot.receipts[request].header["query"])
        if names.setdefault(normalized, name) != name:
            raise InvalidInput(
                "query_groups",
                "repeated queries cannot use different query groups "
                f"({names[normalized]!r} and {name!r} for the same normalized query)",
            )
    return names


_FLOAT_INDEX = {name: i for i, name in enumerate(FLOAT_COLUMNS)}
_FEATURE_ROWS = [_FLOAT_INDEX[c] for c in TRACE_FEATURE_COLUMNS]
_WEIGHT_ROWS = [_FLOAT_INDEX[c] for c in ADDITIVE_WEIGHT_COLUMNS]
_SCALAR_ROWS = [_FLOAT_INDEX[c] for c in SCALAR_WEIGHT_COLUMNS]


def _current_layout(projection: Any) -> np.ndarray:
    """A projection's float block in the current layout's ``FLOAT_COLUMNS``. Receipts before
    version 10 record no interaction features or weights; they meant 0, which is what they get."""
    block = projection.float_block()
    names = projection.float_names
    if names == FLOAT_COLUMNS:
        return block
    at = {name: i for i, name in enumerate(names)}
    out = np.zeros((len(FLOAT_COLUMNS), block.shape[1]), dtype=np.float64)
    for i, name in enumerate(FLOAT_COLUMNS):
        if name in at:
            out[i] = block[at[name]]
    return out


def _judged_arrays(snapshot: FeedbackSnapshot, requests: Sequence[Request]) -> Judged:
    if not requests:
        empty = np.zeros(0)
        return Judged(
            np.zeros(0, np.int64),
            np.zeros(0, bool),
            np.zeros((0, len(_FEATURE_ROWS))),
            np.zeros((0, len(_WEIGHT_ROWS))),
            np.zeros((0, len(_SCALAR_ROWS))),
            empty,
            empty,
            empty,
            np.zeros(0, bool),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            [],
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
        )
    blocks, sizes, n_pos, policies, id_keys = [], [], [], [], []
    ops: dict[int, list[dict[str, Any]]] = {}  # row → its recorded operations (rows with none omitted)
    row = 0
    for req in requests:
        evidence = snapshot.receipts[req.request_id]
        ranks = req.positives + req.negatives
        blocks.append(_current_layout(evidence.projection)[:, ranks])
        sizes.append(len(ranks))
        n_pos.append(len(req.positives))
        policies.append(_POLICY_CODES[evidence.header["ranking_policy"]])
        judged_ids = evidence.node_ids_at(ranks)
        # Ties break by node id; judged candidates only compete within their request, so the
        # order of their id strings there is the whole key (string order = UUID order).
        order = sorted(range(len(ranks)), key=judged_ids.__getitem__)
        key = [0] * len(ranks)
        for position, i in enumerate(order):
            key[i] = position
        id_keys.extend(key)
        adjustments = evidence.adjustments()
        if adjustments is not None:
            for i, r in enumerate(ranks):
                if adjustments[r] != "[]":
                    ops[row + i] = parse_json(adjustments[r])
        row += len(ranks)
    floats = np.concatenate(blocks, axis=1)
    size = np.array(sizes, dtype=np.int64)
    positives = np.array(n_pos, dtype=np.int64)
    negatives = size - positives
    request = np.repeat(np.arange(len(requests), dtype=np.int64), size)
    starts = np.concatenate([[0], np.cumsum(size)[:-1]])
    positive = (np.arange(request.size) - starts[request]) < positives[request]
    # Every (positive, negative) pair of every request, built without a Python loop.
    per_request = positives * negatives
    pair_request = np.repeat(np.arange(len(requests), dtype=np.int64), per_request)
    offsets = np.concatenate([[0], np.cumsum(per_request)[:-1]])
    within = np.arange(pair_request.size) - offsets[pair_request]
    pair_p = starts[pair_request] + within // negatives[pair_request]
    pair_n = starts[pair_request] + positives[pair_request] + within % negatives[pair_request]
    return Judged(
        request=request,
        positive=positive,
        features=floats[_FEATURE_ROWS].T.copy(),
        weights=floats[_WEIGHT_ROWS].T.copy(),
        scalars=floats[_SCALAR_ROWS].T.copy(),
        recorded_base=floats[_FLOAT_INDEX["f_base_score"]].copy(),
        recorded=floats[_FLOAT_INDEX["score"]].copy(),
        path=floats[_FLOAT_INDEX["f_path_score"]].copy(),
        reranked=~np.isnan(floats[_FLOAT_INDEX["reranker_score"]]),
        policy=np.repeat(np.array(policies, dtype=np.int64), size),
        id_key=np.array(id_keys, dtype=np.int64),
        layers=_layers(ops, request.size),
        pair_positive=pair_p,
        pair_negative=pair_n,
        pair_request=pair_request,
    )


def _layers(ops: dict[int, list[dict[str, Any]]], rows: int) -> list[Layer]:
    depth = max((len(o) for o in ops.values()), default=0)
    layers = []
    for level in range(depth):
        kind = np.zeros(rows, dtype=np.int64)
        coefficient = np.ones(rows, dtype=np.float64)
        neural = np.zeros(rows, dtype=np.float64)
        for row, seq in ops.items():
            if level < len(seq):
                op = seq[level]
                kind[row] = _BLEND if op["kind"] == "neural_blend" else _MULTIPLY
                coefficient[row] = op["coefficient"]
                neural[row] = op.get("neural_score", 0.0)
        layers.append(Layer(kind, coefficient, neural))
    return layers
