"""The one implementation under both surfaces: each operation takes the caller's ``Principal``
and a validated request model, calls ``MemoryEngine`` with the key's owner, and returns plain
JSON data. HTTP routes (``prme_api.http``) and MCP tools (``prme_api.mcp``) only translate.

Scope rules: scopes a request names must be within the key's scopes (``ScopeForbidden``, 403);
a record read by id whose scopes are outside them reads as not found (404), the same as a
missing or foreign id; pages of records list only those within them. A key limited to some
scopes chooses the ids of new records in a namespace of its own (``scoped_id``), so an id that
belongs to a record outside its scopes is written like one never used.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar, get_type_hints
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel

from prme_api import models as m
from prme_api.errors import OwnerMismatch, ResourceNotFound, StaleState
from prme_core.access.keys import Principal
from prme_core.canonical import canonical_json, utc_isoformat
from prme_core.engine import MemoryEngine
from prme_core.errors import IdempotencyConflict, InvalidInput, NoOpTransition, ScopeForbidden, StaleProfileError
from prme_core.memory.models import MemoryInput
from prme_core.profiles.model import RankingProfileState
from prme_core.retrieval.requests import RetrievalResponse, RetrieveArguments

R = TypeVar("R")


def _json(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _scopes_of_key(scope_key: str) -> list[str]:
    return scope_key.split("+")


ChosenIdKind = Literal["memory", "feedback", "citation", "profile", "pointer-change"]
"""The kinds of record whose id a caller may choose (a memory's ``id``, ``feedback_id``,
``citation_id``, ``profile_id`` of a new profile, ``change_id``)."""


def scoped_id(principal: Principal, kind: ChosenIdKind, chosen: UUID | None) -> UUID | None:
    """The id a new record gets for the id its caller chose. A key without a scope limit gets the
    chosen id. A limited key gets one derived from its owner, its scope set, ``kind`` and the
    chosen id: ids are unique per owner, so a raw id could meet a record outside the key's scopes
    (409 instead of 200); derived ones meet only records of keys with the same scope limit, whose
    retries therefore still find the first record."""
    if chosen is None or principal.scopes is None:
        return chosen
    key = ["prme:scoped-id:v1", principal.owner, sorted(principal.scopes), kind, str(chosen)]
    return uuid5(NAMESPACE_URL, canonical_json(key).decode())


class _ChosenIds:
    """The ids one request's new records get (``scoped_id``), kept so that a conflict names the
    id the caller chose beside the derived id the engine reports."""

    def __init__(self, principal: Principal, kind: ChosenIdKind) -> None:
        self.principal = principal
        self.kind = kind
        self.chosen: dict[UUID, UUID] = {}  # stored id -> the caller's

    def __call__(self, chosen: UUID | None) -> UUID | None:
        stored = scoped_id(self.principal, self.kind, chosen)
        if stored is not None and chosen is not None and stored != chosen:
            self.chosen[stored] = chosen
        return stored

    def memory(self, item: MemoryInput) -> MemoryInput:
        return item if item.id is None else item.model_copy(update={"id": self(item.id)})

    @contextmanager
    def named_in_conflicts(self) -> Iterator[None]:
        try:
            yield
        except IdempotencyConflict as exc:
            message = named = str(exc)
            for stored, chosen in self.chosen.items():
                named = named.replace(
                    str(stored),
                    f"{stored} (the id {chosen} as chosen by a key limited to {list(self.principal.scopes or ())})",
                )
            if named == message:
                raise
            raise IdempotencyConflict(named) from exc


def state_body(state: RankingProfileState) -> dict[str, Any]:
    """A pointer change as returned: its record, whether it is a retry's replay, and the newer
    change that superseded it (replays only)."""
    body = state.canonical_dict()
    body["replayed"] = state.replayed
    body["superseded_by"] = None if state.superseded_by is None else state.superseded_by.canonical_dict()
    return body


def _result(memory: Any) -> dict[str, Any]:
    body = asdict(memory)
    body["node_id"] = str(memory.node_id)
    body["event_time"] = None if memory.event_time is None else utc_isoformat(memory.event_time)
    body["paths"] = list(memory.paths)
    return body


def retrieval_body(response: RetrievalResponse, *, include_context: bool, include_bundle: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "results": [_result(r) for r in response.results],
        "metadata": response.metadata.model_dump(mode="json"),
    }
    if include_context:
        body["context"] = response.context
    if include_bundle:
        body["bundle"] = _json(response.bundle)
    return body


M = TypeVar("M", bound=Callable[..., Awaitable[Any]])


def operator(method: M) -> M:
    """An operation only an operator key may call (what changes ranking or its evidence: keys,
    holdout queries, learning evaluation, profiles); an agent key gets ``RoleForbidden`` (403)."""
    what = method.__name__.replace("_", " ")

    @functools.wraps(method)
    async def guarded(self: Any, principal: Principal, *args: Any, **kwargs: Any) -> Any:
        principal.require_role("operator", what)
        return await method(self, principal, *args, **kwargs)

    _OPERATOR_ONLY.add(guarded)
    return guarded  # type: ignore[return-value]


_OPERATOR_ONLY: set[Callable[..., Any]] = set()
"""The operations marked ``operator`` (the wrapped functions themselves)."""


def role_of(method: Callable[..., Any]) -> str:
    """The role an operation needs: ``operator`` for those marked so, else ``agent``."""
    return "operator" if getattr(method, "__func__", method) in _OPERATOR_ONLY else "agent"


class MemoryService:
    """Operations over one ``MemoryEngine`` for authenticated principals."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.configured_scopes: tuple[str, ...] = tuple(engine.settings.scopes)

    async def authenticate(self, api_key: str | None) -> Principal:
        return await self.engine.authenticate(api_key)

    # --- scope checks -------------------------------------------------------------------------

    def _scopes(self, principal: Principal, scopes: Sequence[str] | None, field: str = "scopes") -> list[str]:
        if scopes is None:
            allowed = self.configured_scopes if principal.scopes is None else principal.scopes
            return [s for s in self.configured_scopes if s in allowed]
        principal.require(scopes, field)
        return list(scopes)

    @staticmethod
    def _visible(principal: Principal, scopes: Sequence[str], kind: str) -> None:
        if not principal.permits(scopes):
            raise ResourceNotFound(kind)

    @staticmethod
    def _page(items: list[Any], limit: int, key: Callable[[Any], Any]) -> dict[str, Any]:
        return {"items": items, "next_after": str(key(items[-1])) if len(items) == limit else None}

    async def _filtered_page(
        self,
        fetch: Callable[[UUID | None, int], Awaitable[list[R]]],
        visible: Callable[[list[R]], Awaitable[list[bool]]] | None,
        page: m.Page,
        key: Callable[[R], UUID],
    ) -> tuple[list[R], dict[str, Any]]:
        """One page of records, keeping only those ``visible`` marks (pages are refilled from the
        following records, so a page is short only at the end)."""
        kept: list[R] = []
        after = page.after
        while len(kept) < page.limit:
            batch = await fetch(after, page.limit)
            marks = [True] * len(batch) if visible is None else await visible(batch)
            kept.extend(r for r, ok in zip(batch, marks) if ok)
            if len(batch) < page.limit:
                break
            after = key(batch[-1])
        kept = kept[: page.limit]
        return kept, self._page(kept, page.limit, key)

    async def _receipt_scopes_visible(self, principal: Principal, request_ids: list[UUID]) -> list[bool]:
        if principal.scopes is None:
            return [True] * len(request_ids)
        out = []
        for request_id in request_ids:
            receipt = await self.engine.get_receipt(request_id, principal.owner)
            out.append(receipt is not None and principal.permits(receipt.scopes))
        return out

    async def _require_receipt(self, principal: Principal, request_id: UUID) -> None:
        """A scope-limited key may only write feedback on retrievals within its scopes."""
        if not (await self._receipt_scopes_visible(principal, [request_id]))[0]:
            raise ResourceNotFound("retrieval receipt")

    # --- memories ---------------------------------------------------------------------------

    async def whoami(self, principal: Principal, request: m.NoArguments) -> dict[str, Any]:
        body = _json(principal)
        body["configured_scopes"] = list(self.configured_scopes)
        return body

    async def store_memory(self, principal: Principal, request: MemoryInput) -> dict[str, Any]:
        principal.require([request.scope], "scope")
        ids = _ChosenIds(principal, "memory")
        item = ids.memory(request)
        with ids.named_in_conflicts():
            return _json(await self.engine.store_memory(principal.owner, item))

    async def store_batch(self, principal: Principal, request: m.StoreBatchRequest) -> dict[str, Any]:
        for i, item in enumerate(request.items):
            principal.require([item.scope], f"items[{i}].scope")
        ids = _ChosenIds(principal, "memory")
        items = [ids.memory(item) for item in request.items]
        with ids.named_in_conflicts():
            nodes = await self.engine.store_batch(principal.owner, items)
        return {"items": [_json(n) for n in nodes]}

    async def get_memory(self, principal: Principal, request: m.NodeRef) -> dict[str, Any]:
        return _json(await self._own_memory(principal, request.node_id))

    async def list_memories(self, principal: Principal, request: m.ListMemoriesQuery) -> dict[str, Any]:
        """A page of the owner's memories within the key's scopes (filtered by scope, type, time)."""
        page = await self.engine.scan(
            principal.owner,
            scopes=self._scopes(principal, request.scopes),
            include_inactive=request.include_inactive,
            cursor=request.cursor,
            limit=request.limit,
            node_types=None if request.node_types is None else [t.value for t in request.node_types],
            created_from=request.created_from,
            created_to=request.created_to,
        )
        return {"items": [_json(n) for n in page.items], "next_cursor": page.next_cursor}

    async def _own_memory(self, principal: Principal, node_id: UUID) -> Any:
        """The owner's memory within the key's scopes; anything else reads as not found."""
        node = await self.engine.get(principal.owner, node_id)
        self._visible(principal, [node.scope], "memory")
        return node

    async def update_memory(self, principal: Principal, request: m.UpdateMemoryRequest) -> dict[str, Any]:
        """Supersede a memory with new content (the old version stays in its history)."""
        await self._own_memory(principal, request.node_id)
        return _json(await self.engine.supersede(principal.owner, request.node_id, request.content))

    async def archive_memory(self, principal: Principal, request: m.NodeRef) -> dict[str, Any]:
        """Archive a memory: it stays readable by id and in its history, no longer retrieved."""
        await self._own_memory(principal, request.node_id)
        return _json(await self.engine.archive(principal.owner, request.node_id))

    async def delete_memory(self, principal: Principal, request: m.NodeRef) -> dict[str, Any]:
        """Delete a memory (every version, its edges); the deletion record names this key."""
        await self._own_memory(principal, request.node_id)
        return _json(await self.engine.delete_memory(request.node_id, owner=principal.owner, actor=principal.key_id))

    @operator
    async def forget_owner(self, principal: Principal, request: m.ForgetOwnerRequest) -> dict[str, Any]:
        """Forget the key's owner entirely; needs an operator key over every scope."""
        if not principal.permits(self.configured_scopes):
            raise ScopeForbidden("confirm_owner", "forgetting an owner erases every scope; this API key is limited")
        if request.confirm_owner != principal.owner:
            raise InvalidInput("confirm_owner", "must spell out this API key's owner exactly")
        return _json(await self.engine.forget_owner(principal.owner, actor=principal.key_id))

    # --- retrieval --------------------------------------------------------------------------

    async def retrieve(self, principal: Principal, request: m.RetrieveRequest) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        if request.include_cross_scope and not principal.permits(self.configured_scopes):
            raise ScopeForbidden(
                "include_cross_scope", "reads every scope of the owner; this API key is limited to some scopes"
            )
        arguments = {name: getattr(request, name) for name in RetrieveArguments.model_fields if name != "scopes"}
        response = await self.engine.retrieve(request.query, owner=principal.owner, scopes=scopes, **arguments)
        return retrieval_body(response, include_context=request.include_context, include_bundle=request.include_bundle)

    async def get_receipt(self, principal: Principal, request: m.RequestRef) -> dict[str, Any]:
        receipt = await self.engine.get_receipt(request.request_id, principal.owner)
        if receipt is None:
            raise ResourceNotFound("retrieval receipt")
        self._visible(principal, receipt.scopes, "retrieval receipt")
        return receipt.canonical_dict()

    # --- feedback ---------------------------------------------------------------------------

    async def record_relevance(self, principal: Principal, request: m.RecordRelevanceRequest) -> dict[str, Any]:
        await self._require_receipt(principal, request.request_id)
        ids = _ChosenIds(principal, "feedback")
        with ids.named_in_conflicts():
            record = await self.engine.record_relevance(
                request.request_id,
                request.labels,
                owner=principal.owner,
                method=request.method,
                surface=request.surface,
                feedback_id=ids(request.feedback_id),
            )
        return _json(record)

    async def get_relevance(self, principal: Principal, request: m.FeedbackRef) -> dict[str, Any]:
        record = await self.engine.get_relevance(request.feedback_id, principal.owner)
        if record is None:
            raise ResourceNotFound("relevance record")
        self._visible(principal, _scopes_of_key(record.scope_key), "relevance record")
        return _json(record)

    async def list_relevance(self, principal: Principal, request: m.Page) -> dict[str, Any]:
        async def fetch(after: UUID | None, limit: int) -> list[Any]:
            return await self.engine.list_relevance(principal.owner, after=after, limit=limit)

        async def visible(batch: list[Any]) -> list[bool]:
            return [principal.permits(_scopes_of_key(r.scope_key)) for r in batch]

        items, page = await self._filtered_page(
            fetch, None if principal.scopes is None else visible, request, lambda r: r.feedback_id
        )
        return {**page, "items": [_json(r) for r in items]}

    async def record_answer_citations(self, principal: Principal, request: m.RecordCitationsRequest) -> dict[str, Any]:
        await self._require_receipt(principal, request.request_id)
        ids = _ChosenIds(principal, "citation")
        with ids.named_in_conflicts():
            record = await self.engine.record_answer_citations(
                request.request_id,
                owner=principal.owner,
                answer_id=request.answer_id,
                cited_node_ids=list(request.cited_node_ids),
                method=request.method,
                answer_digest=request.answer_digest,
                citation_id=ids(request.citation_id),
            )
        return _json(record)

    async def _citation(self, principal: Principal, citation_id: UUID) -> Any:
        record = await self.engine.get_answer_citations(citation_id, principal.owner)
        if record is None or not (await self._receipt_scopes_visible(principal, [record.request_id]))[0]:
            raise ResourceNotFound("answer citation record")
        return record

    async def get_answer_citations(self, principal: Principal, request: m.CitationRef) -> dict[str, Any]:
        return _json(await self._citation(principal, request.citation_id))

    async def list_answer_citations(self, principal: Principal, request: m.Page) -> dict[str, Any]:
        async def fetch(after: UUID | None, limit: int) -> list[Any]:
            return await self.engine.list_answer_citations(principal.owner, after=after, limit=limit)

        async def visible(batch: list[Any]) -> list[bool]:
            return await self._receipt_scopes_visible(principal, [r.request_id for r in batch])

        items, page = await self._filtered_page(fetch, visible, request, lambda r: r.citation_id)
        return {**page, "items": [_json(r) for r in items]}

    async def ablate_context(self, principal: Principal, request: m.AblateContextRequest) -> dict[str, Any]:
        return _json(self.engine.ablate_context(request.bundle, request.node_ids))

    async def assess_context_presence(self, principal: Principal, request: m.AssessPresenceRequest) -> dict[str, Any]:
        citation = await self._citation(principal, request.citation_id)
        credit = self.engine.assess_context_presence(
            request.ablation,
            citation,
            baseline_correct=request.baseline_correct,
            counterfactual_correct=request.counterfactual_correct,
            protocol=request.protocol,
        )
        return _json(credit)

    # --- learning and holdout ---------------------------------------------------------------

    @operator
    async def evaluate_learning(self, principal: Principal, request: m.EvaluateLearningRequest) -> dict[str, Any]:
        report = await self.engine.evaluate_learning(
            principal.owner,
            scopes=self._scopes(principal, request.scopes),
            surface=request.surface,
            config=request.config,
            query_groups=None if request.query_groups is None else {str(k): v for k, v in request.query_groups.items()},
            max_records=request.max_records,
            scope_set_only=principal.scopes is not None,  # a limited key sees nothing of other scopes
        )
        return _json(report)

    @operator
    async def register_holdout_queries(self, principal: Principal, request: m.RegisterHoldoutRequest) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        queries = await self.engine.register_holdout_queries(principal.owner, scopes, request.queries)
        return {"items": [_json(q) for q in queries], "next_after": None}

    @operator
    async def list_holdout_queries(self, principal: Principal, request: m.ScopesQuery) -> dict[str, Any]:
        queries = await self.engine.list_holdout_queries(principal.owner, self._scopes(principal, request.scopes))
        return {"items": [_json(q) for q in queries], "next_after": None}

    @operator
    async def retire_holdout_queries(self, principal: Principal, request: m.RetireHoldoutRequest) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        retired = await self.engine.retire_holdout_queries(principal.owner, scopes, request.holdout_ids)
        return {"retired": retired}

    def _own_report(self, principal: Principal, report: Any, field: str) -> None:
        if report.owner != principal.owner:
            raise OwnerMismatch(f"{field}.owner")
        principal.require(report.scopes, f"{field}.scopes")

    @operator
    async def evaluate_holdout(self, principal: Principal, request: m.EvaluateHoldoutRequest) -> dict[str, Any]:
        self._own_report(principal, request.proposal, "proposal")
        report = await self.engine.evaluate_holdout(request.proposal, config=request.config)
        return _json(report)

    # --- ranking profiles -------------------------------------------------------------------

    @operator
    async def create_ranking_profile(self, principal: Principal, request: m.CreateProfileRequest) -> dict[str, Any]:
        self._own_report(principal, request.proposal, "proposal")
        self._own_report(principal, request.holdout, "holdout")
        ids = _ChosenIds(principal, "profile")
        with ids.named_in_conflicts():
            profile = await self.engine.create_ranking_profile(
                request.proposal,
                request.holdout,
                owner=principal.owner,
                profile_id=ids(request.profile_id),
                baseline_profile_id=request.baseline_profile_id,
            )
        return _json(profile)

    async def _profile_status(self, principal: Principal, profile_id: UUID) -> Any:
        status = await self.engine.get_ranking_profile(profile_id, principal.owner)
        if status is None:
            raise ResourceNotFound("ranking profile")
        self._visible(principal, status.profile.scopes, "ranking profile")
        return status

    @operator
    async def get_ranking_profile(self, principal: Principal, request: m.ProfileRef) -> dict[str, Any]:
        return _json(await self._profile_status(principal, request.profile_id))

    @operator
    async def list_ranking_profiles(self, principal: Principal, request: m.Page) -> dict[str, Any]:
        async def fetch(after: UUID | None, limit: int) -> list[Any]:
            return await self.engine.list_ranking_profiles(principal.owner, after=after, limit=limit)

        async def visible(batch: list[Any]) -> list[bool]:
            return [principal.permits(p.scopes) for p in batch]

        items, page = await self._filtered_page(
            fetch, None if principal.scopes is None else visible, request, lambda p: p.profile_id
        )
        return {**page, "items": [_json(p) for p in items]}

    @operator
    async def get_active_ranking_profile(self, principal: Principal, request: m.ScopesQuery) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        profile = await self.engine.get_active_ranking_profile(principal.owner, scopes)
        return {"profile": None if profile is None else _json(profile)}

    @operator
    async def ranking_profile_history(self, principal: Principal, request: m.HistoryQuery) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        states = await self.engine.ranking_profile_history(
            principal.owner, scopes, limit=request.limit, before=request.before
        )
        items = [state_body(s) for s in states]
        return {"items": items, "next_before": items[-1]["change_id"] if len(items) == request.limit else None}

    @operator
    async def ranking_profile_at(self, principal: Principal, request: m.AsOfQuery) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        state = await self.engine.ranking_profile_at(principal.owner, scopes, request.at)
        return {"state": None if state is None else state_body(state)}

    async def _change(
        self, principal: Principal, scopes: Sequence[str], ids: _ChosenIds, change: Awaitable[Any]
    ) -> dict[str, Any]:
        """Run a pointer change; a stale expectation or a no-op answers with the current state."""
        try:
            with ids.named_in_conflicts():
                return state_body(await change)
        except (StaleProfileError, NoOpTransition) as exc:
            newest = await self.engine.ranking_profile_history(principal.owner, scopes, limit=1)
            raise StaleState(exc, state_body(newest[0]) if newest else None) from exc

    @operator
    async def activate_ranking_profile(self, principal: Principal, request: m.ActivateRequest) -> dict[str, Any]:
        status = await self._profile_status(principal, request.profile_id)
        ids = _ChosenIds(principal, "pointer-change")
        change = self.engine.activate_ranking_profile(
            request.profile_id, owner=principal.owner, change_id=ids(request.change_id), reactivate=request.reactivate
        )
        return await self._change(principal, status.profile.scopes, ids, change)

    def _expected(self, request: m.DeactivateRequest) -> dict[str, Any]:
        return (
            {"expected_profile_id": request.expected_profile_id}
            if "expected_profile_id" in request.model_fields_set
            else {}
        )

    @operator
    async def deactivate_ranking_profile(self, principal: Principal, request: m.DeactivateRequest) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        ids = _ChosenIds(principal, "pointer-change")
        change = self.engine.deactivate_ranking_profile(
            owner=principal.owner, scopes=scopes, change_id=ids(request.change_id), **self._expected(request)
        )
        return await self._change(principal, scopes, ids, change)

    @operator
    async def rollback_ranking_profile(self, principal: Principal, request: m.RollbackRequest) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        if request.profile_id is not None:
            await self._profile_status(principal, request.profile_id)
        ids = _ChosenIds(principal, "pointer-change")
        change = self.engine.rollback_ranking_profile(
            request.profile_id,
            owner=principal.owner,
            scopes=scopes,
            change_id=ids(request.change_id),
            **self._expected(request),
        )
        return await self._change(principal, scopes, ids, change)

    # --- the agent tool set (prme_api.agent_tools) -----------------------------------------------

    async def agent_search(self, principal: Principal, request: Any) -> dict[str, Any]:
        scopes = self._scopes(principal, request.scopes)
        response = await self.engine.retrieve(
            request.query,
            owner=principal.owner,
            scopes=scopes,
            limit=request.limit,
            reference_time=request.reference_time,
        )
        return {
            "request_id": str(response.metadata.request_id),
            "results": [
                {
                    "node_id": str(r.node_id),
                    "content": r.content,
                    "score": r.score,
                    "event_time": None if r.event_time is None else utc_isoformat(r.event_time),
                }
                for r in response.results
            ],
        }

    async def agent_judge(self, principal: Principal, request: Any) -> dict[str, Any]:
        await self._require_receipt(principal, request.request_id)
        judged = await self.engine.record_agent_judgment(request.request_id, request.used, owner=principal.owner)
        return {
            "feedback_id": str(judged.record.feedback_id),
            "relevant": judged.relevant,
            "not_relevant": judged.not_relevant,
            "usable_for_learning": judged.usable_for_learning,
            "reason": judged.reason,
        }

    async def agent_store(self, principal: Principal, request: Any) -> dict[str, Any]:
        item: dict[str, Any] = {"content": request.content}
        if request.scope is not None:
            item["scope"] = request.scope
        if request.event_time is not None:
            item["event_time"] = request.event_time
        memory = MemoryInput.model_validate(item)
        principal.require([memory.scope], "scope")
        node = await self.engine.store_memory(principal.owner, memory)
        return {"node_id": str(node.id), "scope": node.scope}

    async def agent_get(self, principal: Principal, request: Any) -> dict[str, Any]:
        node = _json(await self.engine.get(principal.owner, request.node_id))
        self._visible(principal, [node["scope"]], "memory")
        return {k: node[k] for k in ("content", "scope", "event_time", "created_at")} | {"node_id": node["id"]}

    # --- keys ---------------------------------------------------------------------------------

    @operator
    async def create_api_key(self, principal: Principal, request: m.CreateKeyRequest) -> dict[str, Any]:
        """A key for the operator's own owner, within the operator key's scopes."""
        scopes = None if request.scopes is None else self._scopes(principal, request.scopes)
        if scopes is None and principal.scopes is not None:
            scopes = list(principal.scopes)
        created = await self.engine.create_api_key(
            principal.owner, scopes=scopes, expires_at=request.expires_at, role=request.role
        )
        return {"key": _json(created.key), "api_key": created.api_key}

    @operator
    async def list_api_keys(self, principal: Principal, request: m.NoArguments) -> dict[str, Any]:
        """The operator's owner's keys (never their secrets), within the operator key's scopes."""
        statuses = await self.engine.list_api_keys(principal.owner)
        visible = [
            k for k in statuses if principal.scopes is None or principal.permits(k.key.scopes or self.configured_scopes)
        ]
        return {"items": [_json(k) for k in visible]}

    @operator
    async def revoke_api_key(self, principal: Principal, request: m.KeyRef) -> dict[str, Any]:
        """Revoke one of the owner's keys; another owner's key id reads as unknown (404)."""
        mine = {k.key.key_id: k for k in await self.engine.list_api_keys(principal.owner)}
        status = mine.get(request.key_id)
        if status is None or not principal.permits(status.key.scopes or self.configured_scopes):
            raise ResourceNotFound("API key")
        return _json(await self.engine.revoke_api_key(request.key_id))


@dataclass(frozen=True)
class Operation:
    """One operation as a tool: its name, what it does and its method (whose ``request``
    parameter's type is the request model)."""

    name: str
    description: str
    method: str

    @property
    def model(self) -> type[BaseModel]:
        """The request model: the type of the service method's ``request`` parameter."""
        return get_type_hints(getattr(MemoryService, self.method))["request"]  # type: ignore[no-any-return]

    @property
    def role(self) -> str:
        """The role a key needs to call it (the service method's)."""
        return role_of(getattr(MemoryService, self.method))


OPERATIONS: tuple[Operation, ...] = (
    Operation("memory_store", "Store one memory for the key's owner.", "store_memory"),
    Operation("memory_store_batch", "Store memories atomically (all or none).", "store_batch"),
    Operation("memory_get", "The current version of one memory.", "get_memory"),
    Operation(
        "memory_list", "A page of memories, by scope, node type and storage time (cursor-paged).", "list_memories"
    ),
    Operation("memory_update", "Supersede a memory with new content (history kept).", "update_memory"),
    Operation("memory_archive", "Archive a memory (kept, no longer retrieved).", "archive_memory"),
    Operation(
        "memory_delete",
        "Delete a memory for good (every version and edge); receipts keep only its id and content hash.",
        "delete_memory",
    ),
    Operation(
        "owner_forget",
        "Forget this key's owner entirely (memories, receipts, feedback, profiles, keys); cannot be undone.",
        "forget_owner",
    ),
    Operation(
        "memory_retrieve",
        "Hybrid retrieval with a saved, replayable receipt: timezone-aware reference_time, scopes, validity "
        "(time_from/time_to) and event-time bounds, min_fidelity, cross-scope, retrieval_mode, ranking_multipliers; "
        "include_context returns the exact rendered context, include_bundle the packed bundle.",
        "retrieve",
    ),
    Operation("memory_get_retrieval_receipt", "The saved receipt of a retrieval.", "get_receipt"),
    Operation(
        "memory_record_relevance",
        "Record boolean relevance labels for members of a saved retrieval (idempotent by feedback_id).",
        "record_relevance",
    ),
    Operation("memory_get_relevance", "One relevance record.", "get_relevance"),
    Operation("memory_list_relevance", "A page of relevance records, by feedback id.", "list_relevance"),
    Operation(
        "memory_record_answer_citations",
        "Record which included memories an answer cited (idempotent by citation_id).",
        "record_answer_citations",
    ),
    Operation("memory_get_answer_citations", "One answer citation record.", "get_answer_citations"),
    Operation("memory_list_answer_citations", "A page of answer citation records.", "list_answer_citations"),
    Operation(
        "memory_ablate_context",
        "Remove included entries from a packed bundle without re-retrieving (exact token accounting).",
        "ablate_context",
    ),
    Operation(
        "memory_assess_context_presence",
        "Tier one cited, ablated entry by baseline and counterfactual correctness.",
        "assess_context_presence",
    ),
    Operation(
        "memory_evaluate_learning",
        "Offline proposal for an exact scope set from the owner's relevance records (changes nothing).",
        "evaluate_learning",
    ),
    Operation(
        "memory_register_holdout_queries",
        "Register holdout queries with their complete relevant sets (idempotent).",
        "register_holdout_queries",
    ),
    Operation("memory_list_holdout_queries", "Active holdout queries of a scope set.", "list_holdout_queries"),
    Operation("memory_retire_holdout_queries", "Retire holdout queries.", "retire_holdout_queries"),
    Operation(
        "memory_evaluate_holdout",
        "Run the registered full-retrieval holdout for a proposal and evaluate it.",
        "evaluate_holdout",
    ),
    Operation(
        "memory_create_api_key",
        "Make an API key for this owner (agent or operator role); its secret is shown once.",
        "create_api_key",
    ),
    Operation("memory_list_api_keys", "This owner's API keys (never their secrets).", "list_api_keys"),
    Operation("memory_revoke_api_key", "Revoke one of this owner's API keys.", "revoke_api_key"),
    Operation(
        "memory_create_ranking_profile",
        "Persist a profile from a positive proposal and holdout (does not activate).",
        "create_ranking_profile",
    ),
    Operation("memory_get_ranking_profile", "A profile and whether it is active.", "get_ranking_profile"),
    Operation("memory_list_ranking_profiles", "A page of profiles.", "list_ranking_profiles"),
    Operation(
        "memory_get_active_ranking_profile",
        "The profile serving a scope set (null: base scoring).",
        "get_active_ranking_profile",
    ),
    Operation(
        "memory_list_ranking_profile_history",
        "Pointer changes of a scope set, newest first.",
        "ranking_profile_history",
    ),
    Operation("memory_get_ranking_profile_at", "The pointer change in force at a time.", "ranking_profile_at"),
    Operation(
        "memory_activate_ranking_profile",
        "Activate a profile over the baseline it was evaluated against (idempotent by change_id).",
        "activate_ranking_profile",
    ),
    Operation(
        "memory_deactivate_ranking_profile",
        "Return a scope set to base scoring (idempotent by change_id).",
        "deactivate_ranking_profile",
    ),
    Operation(
        "memory_rollback_ranking_profile",
        "Serve an earlier profile again, or base scoring (idempotent by change_id).",
        "rollback_ranking_profile",
    ),
)
