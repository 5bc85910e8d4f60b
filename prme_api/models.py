"""Request and response bodies of the HTTP API and the MCP tools (one model per operation).

Domain models are reused wherever one exists (``MemoryInput``, ``RankingMultipliers``,
``LearningConfig``, ``LearningEvaluation``, ``FullRetrievalEvaluation``, ``ContextBundle``, …), so
a field added to them reaches both surfaces unchanged. No model here has an owner: the owner is
always the API key's. Bodies are strict (unknown fields, NaN, naive datetimes and coerced
types are refused); list queries are lax only where HTTP query strings need it (``limit=5``).
Over HTTP every body is also validated strictly in JSON mode (``prme_api.http.StrictJson``): a
number only from a JSON number, a boolean only from true or false, a string only from a string, a
time only from an ISO 8601 string with a timezone; UUIDs, times and enums arrive as strings.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Annotated, Any, Generic, TypeVar, get_type_hints
from uuid import UUID

from pydantic import BaseModel, Field, StrictBool, StrictInt, create_model

from prme_core.access.keys import Principal, Role
from prme_core.feedback.ablation import ContextAblation
from prme_core.feedback.citations import AnswerCitationSubmission, CitationMethod
from prme_core.feedback.relevance import RelevanceMethod, RelevanceSubmission, Surface
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import LIMITATIONS as HOLDOUT_LIMITATIONS
from prme_core.learning.full_retrieval import FullRetrievalEvaluation, FullRetrievalEvaluationConfig
from prme_core.learning.holdout import MAX_QUERIES_PER_CALL, HoldoutQuerySpec
from prme_core.learning.proposal import OFFLINE_LIMITATIONS, LearningEvaluation
from prme_core.learning.snapshot import DEFAULT_MAX_RECORDS, MAX_RECORDS_BOUND
from prme_core.memory.bank import MAX_BATCH_NODES, MAX_PAGE
from prme_core.memory.models import MemoryInput, NodeType, ScopeName
from prme_core.retrieval.packing import ContextBundle
from prme_core.retrieval.requests import QueryText, RetrievalMetadata, RetrieveArguments, RetrievedMemory
from prme_core.types import FrozenModel, Label, UtcDatetime

ScopeList = Annotated[list[ScopeName], Field(min_length=1, max_length=64)]
"""An exact scope set as a caller writes it (repeats are dropped, order does not matter)."""
PageLimit = Annotated[int, Field(ge=1, le=MAX_PAGE)]


class Body(FrozenModel):
    """A request body: unknown fields and non-finite numbers refused (``FrozenModel``'s rules);
    counts and flags are strict (``StrictInt``, ``StrictBool``), as in the engine. Not
    ``strict=True`` in its config: that would refuse a UUID or time given as a string in Python
    mode (the MCP tools' arguments); the HTTP API adds JSON-mode strictness over whole bodies."""


class Query(FrozenModel):
    """Query-string parameters: unknown ones refused; numbers may arrive as text."""


# --- memories ---------------------------------------------------------------------------------


class StoreBatchRequest(Body):
    items: Annotated[list[MemoryInput], Field(min_length=1, max_length=MAX_BATCH_NODES)]


class NodeRef(Body):
    node_id: UUID


class ForgetOwnerRequest(Body):
    """Forget the key's owner: every memory, receipt, feedback and citation record, holdout query,
    learning report, profile and pointer, and every API key (this one too). Cannot be undone."""

    confirm_owner: str = Field(
        description="The owner being forgotten, spelled out (must equal the key's owner): a guard against accidents."
    )


class ListMemoriesQuery(Query):
    """A page of the owner's memories, optionally filtered."""

    scopes: ScopeList | None = None
    node_types: Annotated[list[NodeType], Field(min_length=1, max_length=16)] | None = None
    created_from: UtcDatetime | None = None
    created_to: UtcDatetime | None = None
    include_inactive: bool = False
    cursor: Annotated[str, Field(max_length=32)] | None = None
    limit: PageLimit = 100


class MemoryContent(Body):
    content: Annotated[str, Field(min_length=1)] = Field(description="The memory's new content.")


class UpdateMemoryRequest(Body):
    """A new version of a memory: the old one is kept in its history, marked superseded."""

    node_id: UUID
    content: Annotated[str, Field(min_length=1)] = Field(description="The memory's new content.")


# --- retrieval --------------------------------------------------------------------------------


class RetrieveRequest(RetrieveArguments):
    """A retrieval: the query and every argument of ``MemoryEngine.retrieve``
    (``RetrieveArguments``); ``scopes`` defaults to every configured scope the key may read."""

    query: QueryText = Field(description="The question, as the user would ask it.")
    include_context: StrictBool = Field(
        default=True,
        description="Return the exact rendered context (the text whose SHA-256 is metadata.context_sha256).",
    )
    include_bundle: StrictBool = Field(
        default=False, description="Return the packed ContextBundle too (the input of context ablation)."
    )


RetrievedMemoryOut = create_model(
    "RetrievedMemoryOut", **{name: (hint, ...) for name, hint in get_type_hints(RetrievedMemory).items()}
)
"""One result as a retrieval body documents it: the fields of ``RetrievedMemory``, all required."""


class RetrieveResponse(BaseModel):
    results: list[RetrievedMemoryOut]
    context: str | None = None
    bundle: ContextBundle | None = None
    metadata: RetrievalMetadata


class RequestRef(Body):
    request_id: UUID


# --- feedback ---------------------------------------------------------------------------------


class RecordRelevanceRequest(RelevanceSubmission):
    """Labels for members of one saved retrieval; ``feedback_id`` makes retries idempotent."""

    feedback_id: UUID | None = None
    surface: Surface = "results"
    method: RelevanceMethod = "explicit_user"


class FeedbackRef(Body):
    feedback_id: UUID


class RecordCitationsRequest(AnswerCitationSubmission):
    """Which included memories an answer cited; ``citation_id`` makes retries idempotent."""

    citation_id: UUID | None = None
    method: CitationMethod = "model_reported"


class CitationRef(Body):
    citation_id: UUID


class Page(Query):
    after: UUID | None = None
    limit: PageLimit = 100


class AblateContextRequest(Body):
    bundle: ContextBundle
    node_ids: Annotated[list[UUID], Field(min_length=1, max_length=1000)]


class AssessPresenceRequest(Body):
    ablation: ContextAblation
    citation_id: UUID
    baseline_correct: StrictBool
    counterfactual_correct: StrictBool
    protocol: Label


# --- learning and holdout ---------------------------------------------------------------------


class EvaluateLearningRequest(Body):
    scopes: ScopeList
    surface: Surface = "results"
    config: LearningConfig | None = None
    query_groups: dict[UUID, Label] | None = None
    max_records: StrictInt = Field(default=DEFAULT_MAX_RECORDS, ge=1, le=MAX_RECORDS_BOUND)


class RegisterHoldoutRequest(Body):
    scopes: ScopeList
    queries: Annotated[list[HoldoutQuerySpec], Field(min_length=1, max_length=MAX_QUERIES_PER_CALL)]


class ScopesQuery(Query):
    scopes: ScopeList


class RetireHoldoutRequest(Body):
    scopes: ScopeList
    holdout_ids: Annotated[list[UUID], Field(min_length=1, max_length=MAX_QUERIES_PER_CALL)]


class EvaluateHoldoutRequest(Body):
    proposal: LearningEvaluation
    config: FullRetrievalEvaluationConfig | None = None


# --- ranking profiles -------------------------------------------------------------------------


class CreateProfileRequest(Body):
    proposal: LearningEvaluation
    holdout: FullRetrievalEvaluation
    profile_id: UUID | None = None
    baseline_profile_id: UUID | None = None


class ProfileRef(Body):
    profile_id: UUID


class HistoryQuery(Query):
    scopes: ScopeList
    limit: PageLimit = 100
    before: UUID | None = None


class AsOfQuery(Query):
    scopes: ScopeList
    at: UtcDatetime


class ActivateBody(Body):
    change_id: UUID | None = None
    reactivate: StrictBool = True


class ActivateRequest(ActivateBody):
    profile_id: UUID


class DeactivateRequest(Body):
    """``expected_profile_id``: refuse unless this profile (null: base scoring) is active now;
    leave it out to change whatever is active."""

    scopes: ScopeList
    change_id: UUID | None = None
    expected_profile_id: UUID | None = None


class RollbackRequest(DeactivateRequest):
    profile_id: UUID | None
    """The earlier profile to serve again, or null for base scoring."""


class NoArguments(Body):
    pass


# --- keys ---------------------------------------------------------------------------------------


class CreateKeyRequest(Body):
    """A new key for the operator key's own owner."""

    role: Role = Field(
        default="agent",
        description="agent (memories, retrieval, feedback) or operator (also keys, "
        "holdout queries, learning, profiles).",
    )
    scopes: ScopeList | None = Field(
        default=None, description="Limit the key to these scopes (within the operator key's); default the operator's."
    )
    expires_at: UtcDatetime | None = Field(default=None, description="When the key stops working (timezone-aware).")


class KeyRef(Body):
    key_id: Annotated[str, Field(pattern="^[0-9a-f]{24}$", description="The key id (prme_<key id>_…).")]


# --- response envelopes (documentation; the operations build plain JSON) ----------------------

T = TypeVar("T")


class Items(BaseModel, Generic[T]):
    items: list[T]
    next_after: str | None = Field(default=None, description="Pass as `after` for the next page (null: last page).")


class Retired(BaseModel):
    retired: int


class History(BaseModel, Generic[T]):
    items: list[T]
    next_before: str | None = Field(
        default=None, description="Pass as `before` for the next (older) page (null: last page)."
    )


# --- request examples -------------------------------------------------------------------------
# The bodies /docs offers to "Try it out": OpenAPI media-type examples that prme_api.http attaches
# to each route. They are kept out of the models' JSON schemas, which are also the MCP tools' input
# schemas. tests/api/test_api_docs.py sends every one and expects no 422. The bundle, ablation and
# two reports are what the API returned for EXAMPLE_OWNER with one memory (EXAMPLE_NODE_ID) and one
# holdout query; the bundle and the reports are kept as returned in recorded_examples.json (their
# `limitations`, fixed statements of the code, are always today's). When a model change makes them
# fail to load, make them again the same way (store the memory, retrieve with include_bundle, ablate
# it, register the query, POST /v1/learning/evaluate, then /v1/learning/holdout with that proposal)
# and save the responses there.

EXAMPLE_OWNER = "example-owner"
EXAMPLE_NODE_ID = "5f0c3a52-8d4e-4c1b-9a6e-2b7d9e1f4a10"
EXAMPLE_TIME = "2026-12-07T09:00:00Z"
_REQUEST_ID = "8c2d4f1e-6a3b-4e5f-9d7c-1b2a3c4d5e6f"
_FEEDBACK_ID = "0b6e3d2a-7c41-4f58-a9d3-5e2f1c7b8a90"
_CITATION_ID = "3e7a9c15-2b4d-4f6e-8a1c-9d0b2e4f6a87"
_HOLDOUT_ID = "6d1f8b3c-4a5e-4c7d-b2e9-0f3a5c7e9b14"
_PROFILE_ID = "9a4c2e6f-1d3b-4b5a-8e7c-2f4d6a8c0e13"
_CHANGE_ID = "c7e5a3f1-9b2d-4d6c-a8e0-3f5b7d9c1e24"
_QUERY = "what does the cat's checkup cost"

_RECORDED: dict[str, dict[str, Any]] = json.loads(
    resources.files("prme_api").joinpath("recorded_examples.json").read_text(encoding="utf-8")
)
_BUNDLE_EXAMPLE = _RECORDED["bundle"]
_ABLATION_EXAMPLE: dict[str, Any] = {
    "schema_version": 1,
    "semantics": "exact_context_entry_removal",
    "removed_node_ids": ["5f0c3a52-8d4e-4c1b-9a6e-2b7d9e1f4a10"],
    "baseline_context_sha256": "4670f00f6efcf0fe629d224611f81974c8d6cddab5efd8e76dd85e2c8f30595d",
    "counterfactual_context_sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "baseline_tokens_used": 133,
    "removed_tokens": 100,
    "counterfactual": {  # the bundle above with its one entry removed
        **_BUNDLE_EXAMPLE,
        "header": "",
        "entries": [],
        "excluded_ids": ["5f0c3a52-8d4e-4c1b-9a6e-2b7d9e1f4a10"],
        "tokens_used": 0,
        "budget_remaining": 256,
    },
}
_PROPOSAL_EXAMPLE = {**_RECORDED["proposal"], "limitations": list(OFFLINE_LIMITATIONS)}
_HOLDOUT_EXAMPLE = {**_RECORDED["holdout"], "limitations": list(HOLDOUT_LIMITATIONS)}


def _example(summary: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"summary": summary, "value": value}


REQUEST_EXAMPLES: dict[str, dict[str, dict[str, Any]]] = {
    "store_memory": {
        "fact": _example(
            "A fact with the time it happened",
            {
                "content": "The cat's annual checkup at the vet costs 80 euros",
                "scope": "personal",
                "node_type": "fact",
                "event_time": "2026-11-03T09:30:00Z",
            },
        ),
        "minimal": _example("Only the content (scope personal, type note)", {"content": "Alice prefers oolong tea"}),
    },
    "store_batch": {
        "two": _example(
            "Two memories in two scopes, stored together or not at all",
            {
                "items": [
                    {"content": "Alice prefers oolong tea", "node_type": "preference"},
                    {"content": "The garden project's budget is 400 euros", "scope": "project", "node_type": "fact"},
                ]
            },
        )
    },
    "update_memory": {"content": _example("The new content", {"content": "The cat's annual checkup costs 95 euros"})},
    "forget_owner": {
        "confirm": _example("Spell out the key's owner", {"confirm_owner": EXAMPLE_OWNER}),
    },
    "retrieve": {
        "question": _example(
            "A question at a given time, with the rendered context",
            {
                "query": _QUERY,
                "scopes": ["personal"],
                "reference_time": EXAMPLE_TIME,
                "limit": 5,
                "include_context": True,
                "include_bundle": False,
            },
        ),
        "minimal": _example("Only the query (every scope the key may read, now)", {"query": _QUERY}),
    },
    "record_relevance": {
        "labels": _example(
            "One retrieved memory judged relevant (retry with the same feedback_id safely)",
            {
                "request_id": _REQUEST_ID,
                "labels": {EXAMPLE_NODE_ID: True},
                "feedback_id": _FEEDBACK_ID,
                "surface": "results",
                "method": "explicit_user",
            },
        )
    },
    "record_answer_citations": {
        "cited": _example(
            "An answer that cited one memory of the context",
            {
                "request_id": _REQUEST_ID,
                "answer_id": "answer-1",
                "cited_node_ids": [EXAMPLE_NODE_ID],
                "citation_id": _CITATION_ID,
                "method": "model_reported",
            },
        )
    },
    "ablate_context": {
        "remove": _example(
            "Remove one entry from a bundle a retrieval returned (include_bundle: true)",
            {"bundle": _BUNDLE_EXAMPLE, "node_ids": [EXAMPLE_NODE_ID]},
        )
    },
    "assess_context_presence": {
        "tier": _example(
            "The answer was right with the entry and wrong without it",
            {
                "ablation": _ABLATION_EXAMPLE,
                "citation_id": _CITATION_ID,
                "baseline_correct": True,
                "counterfactual_correct": False,
                "protocol": "exact-answer-match",
            },
        )
    },
    "evaluate_learning": {
        "default": _example("A scope set with the default configuration", {"scopes": ["personal"]}),
        "configured": _example(
            "Smaller minimums and the context surface",
            {
                "scopes": ["personal"],
                "surface": "context",
                "config": {"min_training_queries": 10, "min_validation_queries": 8},
                "max_records": 10000,
            },
        ),
    },
    "register_holdout_queries": {
        "one": _example(
            "One query with its complete relevant set (registering it again is a no-op)",
            {
                "scopes": ["personal"],
                "queries": [
                    {
                        "query": _QUERY,
                        "group": "cat-costs",
                        "relevant_node_ids": [EXAMPLE_NODE_ID],
                        "reference_time": EXAMPLE_TIME,
                        "limit": 20,
                    }
                ],
            },
        )
    },
    "retire_holdout_queries": {
        "retire": _example("Retire one query", {"scopes": ["personal"], "holdout_ids": [_HOLDOUT_ID]}),
    },
    "evaluate_holdout": {
        "proposal": _example(
            "The report POST /v1/learning/evaluate returned, unchanged",
            {"proposal": _PROPOSAL_EXAMPLE, "config": {"min_query_groups": 20}},
        )
    },
    "create_ranking_profile": {
        "reports": _example(
            "The proposal and the holdout report evaluated from it, both unchanged",
            {"proposal": _PROPOSAL_EXAMPLE, "holdout": _HOLDOUT_EXAMPLE},
        )
    },
    "deactivate_ranking_profile": {
        "expected": _example(
            "Base scoring, only if this profile serves now",
            {"scopes": ["personal"], "change_id": _CHANGE_ID, "expected_profile_id": _PROFILE_ID},
        ),
        "any": _example("Base scoring, whatever serves now", {"scopes": ["personal"], "change_id": _CHANGE_ID}),
    },
    "rollback_ranking_profile": {
        "profile": _example(
            "Serve an earlier profile again",
            {"scopes": ["personal"], "profile_id": _PROFILE_ID, "change_id": _CHANGE_ID},
        ),
        "base": _example("Back to base scoring", {"scopes": ["personal"], "profile_id": None, "change_id": _CHANGE_ID}),
    },
    "activate_ranking_profile": {
        "activate": _example(
            "Activate (a retry with the same change_id replays the first answer)",
            {"change_id": _CHANGE_ID, "reactivate": True},
        )
    },
    "agent_judge": {
        "used": _example(
            "The answer used one of the memories a retrieval returned",
            {"request_id": _REQUEST_ID, "used": [EXAMPLE_NODE_ID]},
        ),
        "none": _example("Nothing it returned helped", {"request_id": _REQUEST_ID, "used": []}),
    },
    "create_api_key": {
        "agent": _example("An agent key limited to one scope", {"role": "agent", "scopes": ["personal"]}),
        "operator": _example("An operator key over the operator key's scopes", {"role": "operator"}),
    },
}
"""Example bodies by ``MemoryService`` method (the operation each route calls), by example name."""


__all__ = [
    "AblateContextRequest",
    "ActivateBody",
    "ActivateRequest",
    "AsOfQuery",
    "AssessPresenceRequest",
    "CitationRef",
    "EXAMPLE_NODE_ID",
    "EXAMPLE_OWNER",
    "EXAMPLE_TIME",
    "CreateProfileRequest",
    "DeactivateRequest",
    "EvaluateHoldoutRequest",
    "EvaluateLearningRequest",
    "FeedbackRef",
    "HistoryQuery",
    "Items",
    "MemoryInput",
    "NoArguments",
    "NodeRef",
    "History",
    "Page",
    "Principal",
    "ProfileRef",
    "RecordCitationsRequest",
    "RecordRelevanceRequest",
    "REQUEST_EXAMPLES",
    "RegisterHoldoutRequest",
    "RequestRef",
    "RetireHoldoutRequest",
    "Retired",
    "RetrieveRequest",
    "RetrieveResponse",
    "RollbackRequest",
    "ScopesQuery",
    "StoreBatchRequest",
]
