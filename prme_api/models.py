"""Request and response bodies of the HTTP API and the MCP tools (one model per operation).

Domain models are reused wherever one exists (``MemoryInput``, ``RankingMultipliers``,
``LearningConfig``, ``LearningEvaluation``, ``FullRetrievalEvaluation``, ``ContextBundle``, …), so
a field added to them reaches both surfaces unchanged. No model here has an owner: the owner is
always the API key's. Bodies are strict (unknown fields, NaN, naive datetimes and coerced
types are refused); list queries are lax only where HTTP query strings need it (``limit=5``).
"""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field, StrictBool, StrictInt

from prme_core.access.keys import Principal, Role
from prme_core.feedback.ablation import ContextAblation
from prme_core.feedback.citations import AnswerCitationSubmission, CitationMethod
from prme_core.feedback.relevance import RelevanceMethod, RelevanceSubmission, Surface
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import FullRetrievalEvaluation, FullRetrievalEvaluationConfig
from prme_core.learning.holdout import MAX_QUERIES_PER_CALL, HoldoutQuerySpec
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.snapshot import DEFAULT_MAX_RECORDS, MAX_RECORDS_BOUND
from prme_core.memory.bank import MAX_BATCH_NODES, MAX_PAGE
from prme_core.memory.models import MemoryInput, NodeType, ScopeName
from prme_core.retrieval.packing import ContextBundle
from prme_core.retrieval.requests import QueryText, RetrievalMetadata, RetrieveArguments
from prme_core.types import FrozenModel, Label, UtcDatetime

ScopeList = Annotated[list[ScopeName], Field(min_length=1, max_length=64)]
"""An exact scope set as a caller writes it (repeats are dropped, order does not matter)."""
PageLimit = Annotated[int, Field(ge=1, le=MAX_PAGE)]


class Body(FrozenModel):
    """A request body: unknown fields and non-finite numbers refused (``FrozenModel``'s rules);
    counts and flags are strict (``StrictInt``, ``StrictBool``), as in the engine."""


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


class RetrievedMemoryOut(BaseModel):
    node_id: UUID
    rank: int
    score: float
    content: str
    scope: str
    node_type: str
    session_id: str | None
    event_time: UtcDatetime | None
    paths: list[str]
    cross_scope: bool
    in_context: bool
    representation: str | None


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


__all__ = [
    "AblateContextRequest",
    "ActivateBody",
    "ActivateRequest",
    "AsOfQuery",
    "AssessPresenceRequest",
    "CitationRef",
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
