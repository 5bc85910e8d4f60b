"""Registered holdout queries, the memory-artifact digest, and running the paired holdout.

A holdout query is an append-only ``holdout_query`` operation; retiring it appends a
``holdout_retired`` operation, and no row is ever changed. Its id is a UUIDv5 of (owner, scope
key, normalized query, reference time), so registering the same query again returns the first
record and registering it with different content is an ``IdempotencyConflict``.

``run_holdout`` executes every active query twice with identical requests (baseline and
candidate multipliers), between two digests of the owner's complete memory state; if the
digests differ the run is refused, because the pairs no longer share one memory artifact. It
receives the engine's request validation and retrieval as two functions (``MemoryClient`` passes
its own), so this module knows nothing of the engine above it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import Field, PrivateAttr, StrictInt, model_validator

from prme_core.canonical import canonical_json, is_sha256_hex, utc_isoformat
from prme_core.errors import (
    CorruptRecord,
    HoldoutIntegrityError,
    HoldoutOverlapsTraining,
    HoldoutQueryNotFound,
    IdempotencyConflict,
    InvalidInput,
    MemoryChangedDuringHoldout,
)
from prme_core.learning import split
from prme_core.learning.full_retrieval import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
    RelevantNodeIds,
    evaluate_full_retrieval,
)
from prme_core.learning.looks import HoldoutLook, LookKey, ProposalLook, record_look
from prme_core.memory.bank import parse_uuid
from prme_core.memory.models import ScopeName, ScopeSet
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.projection import scope_key as make_scope_key
from prme_core.retrieval.multipliers import UNITY, RankingMultipliers
from prme_core.retrieval.requests import MAX_RESULT_LIMIT, QueryText, RetrievalRequest, RetrievalResponse
from prme_core.retrieval.text import normalize_query
from prme_core.storage.base import Store
from prme_core.storage.keyed_records import parse_record, record_operation_id
from prme_core.storage.records import OperationDraft, StoredOperation
from prme_core.storage.session import StoreSession
from prme_core.types import FrozenModel, Label, Owner, Sha256Hex, UtcDatetime, WindowEnd, utc_now
from prme_core.validation import check_limit, check_owner, check_scope_set, parse_model

OP_HOLDOUT = "holdout_query"
OP_RETIRED = "holdout_retired"
MAX_QUERIES_PER_CALL = 10_000
PAGE_SIZE = 1000
MEMORY_ARTIFACT_FORM = "prme-memory-artifact-v1"
_DIGEST_PAGE = 5000

RequestFor = Callable[..., RetrievalRequest]
"""Validates ``retrieve()`` arguments (the query, then keywords) into a request without running
it (``MemoryClient._retrieval_request``: the engine's default scopes, scoring and packing)."""
Retrieve = Callable[..., RetrievalResponse]
"""Runs a retrieval with the same arguments and persists its receipt (``MemoryClient.retrieve``)."""


class HoldoutQuerySpec(FrozenModel):
    """A holdout query to register: its text, clock, filters, limit and COMPLETE relevant set."""

    query: QueryText
    group: Label | None = None
    relevant_node_ids: RelevantNodeIds
    reference_time: UtcDatetime
    time_from: UtcDatetime | None = None
    time_to: WindowEnd = None
    event_time_from: UtcDatetime | None = None
    event_time_to: WindowEnd = None
    limit: StrictInt = Field(default=20, ge=1, le=MAX_RESULT_LIMIT)

    def judgment(self) -> dict[str, Any]:
        """What a re-registration must repeat exactly (the raw query text may differ in case or spacing)."""
        return self.model_dump(mode="json", include=set(HoldoutQuerySpec.model_fields) - {"query"})


class HoldoutQuery(HoldoutQuerySpec):
    """A registered holdout query (one append-only operation; never changed)."""

    schema_version: Literal[1] = 1
    holdout_id: UUID
    owner: Owner
    scopes: ScopeSet
    scope_key: str
    group_id: Sha256Hex
    query_digest: Sha256Hex
    registered_at: UtcDatetime

    @model_validator(mode="after")
    def _derived(self) -> HoldoutQuery:
        if self.scope_key != make_scope_key(self.scopes):
            raise ValueError("scope_key must join the scopes with '+'")
        normalized = normalize_query(self.query)
        if self.group_id != split.group_id(normalized, self.group) or self.query_digest != split.query_digest(
            self.query
        ):
            raise ValueError("group_id and query_digest must be derived from the query and group")
        if self.holdout_id != holdout_id(self.owner, self.scope_key, self.query, self.reference_time):
            raise ValueError("holdout_id must be derived from owner, scope key, normalized query and reference time")
        return self


class HoldoutRetirement(FrozenModel):
    """The append-only record that takes a holdout query out of future runs."""

    schema_version: Literal[1] = 1
    holdout_id: UUID
    owner: Owner
    scope_key: str
    retired_at: UtcDatetime


class HoldoutRun(FrozenModel):
    """Paired receipts of every active holdout query, produced over one memory artifact.

    ``receipts`` (request id → (receipt, checksum)) is kept beside the model, not serialized;
    a run loaded from JSON re-reads them with ``receipts.store.get_receipts``.
    """

    owner: Owner
    scopes: tuple[ScopeName, ...] = Field(min_length=1)
    holdout_ids: tuple[UUID, ...] = Field(min_length=1)
    trials: tuple[FullRetrievalTrial, ...] = Field(min_length=1)
    memory_artifact_sha256: Sha256Hex
    baseline_multipliers: RankingMultipliers
    candidate_multipliers: RankingMultipliers
    query_count: int = Field(ge=1)
    _receipts: dict[UUID, tuple[RetrievalReceipt, str]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _counts(self) -> HoldoutRun:
        if not self.query_count == len(self.trials) == len(self.holdout_ids):
            raise ValueError("query_count must equal the number of trials and holdout ids")
        return self

    @property
    def receipts(self) -> Mapping[UUID, tuple[RetrievalReceipt, str]]:
        return MappingProxyType(self._receipts)

    def evaluate(
        self,
        proposal_input_checksum: str,
        config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
        *,
        receipts: Mapping[UUID, tuple[RetrievalReceipt, str]] | None = None,
        look: int | None = None,
        proposal: ProposalLook | None = None,
    ) -> FullRetrievalEvaluation:
        """``evaluate_full_retrieval`` over this run's receipts (or ``receipts`` for a reloaded
        run); ``look`` is the store's number of this look (``record_run_look``), ``proposal`` the
        store's facts of the proposal (``looks.proposal_look``: a version-4 report)."""
        return evaluate_full_retrieval(
            self._receipts if receipts is None else receipts,
            self.trials,
            owner=self.owner,
            scopes=self.scopes,
            proposal_input_checksum=proposal_input_checksum,
            memory_artifact_sha256=self.memory_artifact_sha256,
            candidate_multipliers=self.candidate_multipliers,
            baseline_multipliers=self.baseline_multipliers,
            config=config,
            look=look,
            offline_look=None if proposal is None else proposal.offline_look,
            offline_alpha=None if proposal is None else proposal.offline_alpha,
        )

    def group_ids(self) -> tuple[str, ...]:
        return tuple(sorted({t.group_id for t in self.trials}))


def record_run_look(
    store: Store,
    run: HoldoutRun,
    *,
    proposal_input_checksum: str,
    baseline_profile_id: UUID | None,
    per_proposal: bool = False,
) -> HoldoutLook:
    """The store's look for evaluating ``run`` against that proposal and baseline (idempotent),
    numbered among the looks at that proposal (``per_proposal``, version 4) or at the partition."""
    key = LookKey(
        run.owner,
        tuple(run.scopes),
        baseline_profile_id,
        proposal_input_checksum,
        run.candidate_multipliers,
        run.memory_artifact_sha256,
        run.group_ids(),
    )
    return record_look(store, key, per_proposal=per_proposal)


def holdout_id(owner: str, scope_key: str, query: str, reference_time: Any) -> UUID:
    """UUIDv5 of (owner, scope key, normalized query, reference time in UTC)."""
    key = ["prme:holdout-query:v1", owner, scope_key, normalize_query(query), utc_isoformat(reference_time)]
    return uuid5(NAMESPACE_URL, canonical_json(key).decode())


# --- registration ---------------------------------------------------------------------------------


def register_holdout_queries(
    store: Store, owner: str, scopes: Sequence[str], queries: Sequence[HoldoutQuerySpec | Mapping[str, Any]]
) -> list[HoldoutQuery]:
    """Validate every query, then append all in one transaction (all or nothing); idempotent."""
    owner = check_owner(owner)
    scope_set = check_scope_set(scopes)
    key = make_scope_key(scope_set)
    if isinstance(queries, (str, bytes, Mapping)) or not isinstance(queries, Sequence):
        raise InvalidInput("queries", "must be a list of HoldoutQuerySpec")
    if not 1 <= len(queries) <= MAX_QUERIES_PER_CALL:
        raise InvalidInput("queries", f"holds {len(queries)} queries; register 1..{MAX_QUERIES_PER_CALL} per call")
    specs = [parse_model(HoldoutQuerySpec, q, f"queries[{i}]") for i, q in enumerate(queries)]
    now = utc_now()
    records = [
        HoldoutQuery(
            **spec.model_dump(),
            owner=owner,
            scopes=scope_set,
            scope_key=key,
            registered_at=now,
            holdout_id=holdout_id(owner, key, spec.query, spec.reference_time),
            group_id=split.group_id(normalize_query(spec.query), spec.group),
            query_digest=split.query_digest(spec.query),
        )
        for spec in specs
    ]
    unique: dict[UUID, HoldoutQuery] = {}
    for i, record in enumerate(records):
        first = unique.setdefault(record.holdout_id, record)
        if first.judgment() != record.judgment():
            raise IdempotencyConflict(
                f"queries[{i}] repeats an earlier query and reference_time of this call with a "
                "different judgment; register one relevant set per query and clock"
            )
    wanted = {str(n) for spec in specs for n in spec.relevant_node_ids}
    with store.transaction() as tx:
        missing = wanted - tx.existing_node_ids(owner, sorted(wanted), scope_set)
        if missing:
            index, node = next((i, n) for i, s in enumerate(specs) for n in s.relevant_node_ids if str(n) in missing)
            raise InvalidInput(
                f"queries[{index}].relevant_node_ids",
                f"{node} is not a memory of owner {owner!r} in scopes {key}; name only existing "
                "node ids of this owner and scope set (a retrieval over them can return no other)",
            )
        stored = {hid: _append_query(tx, record) for hid, record in unique.items()}
    return [stored[r.holdout_id] for r in records]


def _append_query(tx: StoreSession, record: HoldoutQuery) -> HoldoutQuery:
    draft = OperationDraft(
        id=record_operation_id("holdout-query", record.owner, record.holdout_id),
        owner=record.owner,
        op_type=OP_HOLDOUT,
        payload=record.canonical_bytes(),
        scope_key=record.scope_key,
        target_id=str(record.holdout_id),
    )
    op, written = tx.append_operation(draft)
    if written:
        return record
    first = _parse_query(op, record.owner, record.scope_key)
    if first.judgment() != record.judgment():
        raise IdempotencyConflict(
            f"holdout query {record.holdout_id} ({record.query!r} at {utc_isoformat(record.reference_time)}) is "
            "already registered with a different judgment; the first registration stands: retire it and "
            "register the query with another reference_time to change it"
        )
    return first


def list_holdout_queries(store: Store, owner: str, scopes: Sequence[str]) -> list[HoldoutQuery]:
    """Active (unretired) holdout queries of exactly this scope set, ordered by holdout id."""
    owner = check_owner(owner)
    key = make_scope_key(check_scope_set(scopes))
    with store.transaction() as tx:
        registered = _all_operations(tx, owner, OP_HOLDOUT, key)
        retired = {op.target_id for op in _all_operations(tx, owner, OP_RETIRED, key)}
    return [_parse_query(op, owner, key) for op in registered if op.target_id not in retired]


def retire_holdout_queries(store: Store, owner: str, scopes: Sequence[str], holdout_ids: Sequence[Any]) -> int:
    """Retire registered queries (all or nothing); returns how many were newly retired."""
    owner = check_owner(owner)
    key = make_scope_key(check_scope_set(scopes))
    if isinstance(holdout_ids, (str, bytes)) or not isinstance(holdout_ids, Sequence):
        raise InvalidInput("holdout_ids", "must be a list of holdout query UUIDs")
    if not 1 <= len(holdout_ids) <= MAX_QUERIES_PER_CALL:
        raise InvalidInput("holdout_ids", f"holds {len(holdout_ids)} ids; retire 1..{MAX_QUERIES_PER_CALL} per call")
    ids = sorted({parse_uuid(v, f"holdout_ids[{i}]") for i, v in enumerate(holdout_ids)})
    now = utc_now()
    with store.transaction() as tx:
        found = tx.find_operations(owner, OP_HOLDOUT, [str(i) for i in ids])
        for hid in ids:
            op = found.get(str(hid))
            if op is None or op.scope_key != key:
                raise HoldoutQueryNotFound(
                    f"holdout_ids: {hid} is not a registered holdout query of owner {owner!r} "
                    f"for scopes {key!r}; see list_holdout_queries()"
                )
        written = 0
        for hid in ids:
            record = HoldoutRetirement(holdout_id=hid, owner=owner, scope_key=key, retired_at=now)
            _, new = tx.append_operation(
                OperationDraft(
                    id=record_operation_id("holdout-retired", owner, hid),
                    owner=owner,
                    op_type=OP_RETIRED,
                    payload=record.canonical_bytes(),
                    scope_key=key,
                    target_id=str(hid),
                )
            )
            written += new
    return written


def _all_operations(tx: StoreSession, owner: str, op_type: str, key: str) -> list[StoredOperation]:
    out: list[StoredOperation] = []
    after: str | None = None
    while True:
        page = tx.list_operations(owner, op_type, scope_key=key, after_target=after, limit=PAGE_SIZE)
        out.extend(page)
        if len(page) < PAGE_SIZE:
            return out
        after = page[-1].target_id


def _parse_query(op: StoredOperation, owner: str, key: str) -> HoldoutQuery:
    record = parse_record(HoldoutQuery, op, owner, "holdout_id")
    if record.scope_key != key or op.scope_key != key:
        raise CorruptRecord(f"stored holdout query {op.target_id}: scope key does not match its operation")
    return record


# --- the memory artifact ------------------------------------------------------------------------


def memory_artifact_digest(store: Store, owner: str) -> str:
    """SHA-256 of the owner's complete memory state: every node version and every edge.

    Rows (``storage.session.ARTIFACT_NODE_COLUMNS`` and ``ARTIFACT_EDGE_COLUMNS``) are read in
    (id, version) and id order and hashed as canonical JSON lines, so any write to the owner's
    memory changes the digest and nothing else (other owners, receipts) does.
    """
    owner = check_owner(owner)
    digest = hashlib.sha256(canonical_json([MEMORY_ARTIFACT_FORM, owner]) + b"\n")
    with store.transaction() as tx:
        after: tuple[str, int] | None = None
        while True:
            rows = tx.node_version_rows(owner, after=after, limit=_DIGEST_PAGE)
            _hash_rows(digest, "node", rows)
            if len(rows) < _DIGEST_PAGE:
                break
            after = (rows[-1][0], rows[-1][1])
        last: str | None = None
        while True:
            rows = tx.edge_rows(owner, after=last, limit=_DIGEST_PAGE)
            _hash_rows(digest, "edge", rows)
            if len(rows) < _DIGEST_PAGE:
                break
            last = rows[-1][0]
    return digest.hexdigest()


def _hash_rows(digest: Any, kind: str, rows: Iterable[Sequence[Any]]) -> None:
    for row in rows:
        digest.update(canonical_json([kind, *row]) + b"\n")


# --- running the holdout ------------------------------------------------------------------------


def _digest_set(digests: Any) -> frozenset[str]:
    """``excluded_query_digests`` as a set of SHA-256 hex digests (``split.query_digest``)."""
    if isinstance(digests, (str, bytes)) or not isinstance(digests, Iterable):
        raise InvalidInput("excluded_query_digests", f"must be a set of query digests, got {type(digests).__name__}")
    values = list(digests)
    bad = next((d for d in values if not is_sha256_hex(d)), None)
    if bad is not None:
        raise InvalidInput("excluded_query_digests", f"{bad!r} is not a SHA-256 hex digest (split.query_digest)")
    return frozenset(values)


def run_holdout(
    store: Store,
    owner: str,
    scopes: Sequence[str],
    *,
    request_for: RequestFor,
    retrieve: Retrieve,
    candidate_multipliers: RankingMultipliers | Mapping[str, float],
    baseline_multipliers: RankingMultipliers | Mapping[str, float] | None = None,
    excluded_query_digests: Iterable[str] = frozenset(),
    limit_override: int | None = None,
) -> HoldoutRun:
    """Run every active holdout query once per arm over one unchanged memory artifact.

    Every request of both arms is validated with ``request_for`` before ``retrieve`` runs the
    first. ``excluded_query_digests`` are the proposal's training and validation query digests
    (``split.query_digest``); a holdout query among them is refused.
    """
    owner = check_owner(owner)
    scope_set = check_scope_set(scopes)
    candidate = parse_model(RankingMultipliers, candidate_multipliers, "candidate_multipliers")
    baseline = (
        UNITY
        if baseline_multipliers is None
        else parse_model(RankingMultipliers, baseline_multipliers, "baseline_multipliers")
    )
    excluded = _digest_set(excluded_query_digests)
    if limit_override is not None:
        check_limit(limit_override, field="limit_override", maximum=MAX_RESULT_LIMIT)
    queries = list_holdout_queries(store, owner, scope_set)
    key = make_scope_key(scope_set)
    if not queries:
        raise HoldoutQueryNotFound(
            f"owner {owner!r} has no active holdout queries for scopes {key!r}; register "
            "them with register_holdout_queries() before running the holdout"
        )
    overlap = [q for q in queries if q.query_digest in excluded]
    if overlap:
        raise HoldoutOverlapsTraining(
            f"{len(overlap)} of {len(queries)} active holdout queries for scopes {key!r} are among the proposal's "
            "training or validation queries (excluded_query_digests); retire them with retire_holdout_queries() "
            "or register other holdout queries, so the holdout stays independent of the proposal"
        )

    requests = [
        dict(
            owner=owner,
            scopes=list(scope_set),
            reference_time=q.reference_time,
            limit=limit_override or q.limit,
            time_from=q.time_from,
            time_to=q.time_to,
            event_time_from=q.event_time_from,
            event_time_to=q.event_time_to,
        )
        for q in queries
    ]
    for q, request in zip(queries, requests):  # every request of both arms is valid before the first runs
        for multipliers in (baseline, candidate):
            try:
                request_for(q.query, ranking_multipliers=multipliers, **request)
            except InvalidInput as exc:
                raise InvalidInput(
                    exc.field,
                    f"holdout query {q.holdout_id} cannot run: {exc}; retire it with "
                    "retire_holdout_queries() and register a valid one",
                ) from None

    before = memory_artifact_digest(store, owner)
    trials: list[FullRetrievalTrial] = []
    receipts: dict[UUID, tuple[RetrievalReceipt, str]] = {}
    for q, request in zip(queries, requests):
        ids = []
        for arm, multipliers in (("baseline", baseline), ("candidate", candidate)):
            response = retrieve(q.query, ranking_multipliers=multipliers, **request)
            meta = response.metadata
            if not meta.receipt_persisted or meta.receipt_checksum is None:
                raise HoldoutIntegrityError(
                    f"holdout query {q.holdout_id}: the {arm} receipt was not persisted ({meta.receipt_error}); "
                    "a holdout needs both receipts stored: fix the store and rerun"
                )
            receipts[meta.request_id] = (response.receipt, meta.receipt_checksum)
            ids.append(meta.request_id)
        trials.append(
            FullRetrievalTrial(
                group_id=q.group_id,
                baseline_request_id=ids[0],
                candidate_request_id=ids[1],
                relevant_node_ids=q.relevant_node_ids,
            )
        )
    after = memory_artifact_digest(store, owner)
    if after != before:
        raise MemoryChangedDuringHoldout(
            f"owner {owner!r}'s memory changed while the holdout ran (digest {before[:12]}… → {after[:12]}…); "
            "pause writes and maintenance for this owner and rerun the holdout",
            before=before,
            after=after,
        )
    run = HoldoutRun(
        owner=owner,
        scopes=scope_set,
        holdout_ids=tuple(q.holdout_id for q in queries),
        trials=tuple(trials),
        memory_artifact_sha256=before,
        baseline_multipliers=baseline,
        candidate_multipliers=candidate,
        query_count=len(queries),
    )
    run._receipts = receipts
    return run
