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

from typing import Annotated, Any, Generic, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field, StrictBool, StrictInt

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
from prme_core.retrieval.requests import QueryText, RetrievalMetadata, RetrieveArguments
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


# --- request examples -------------------------------------------------------------------------
# The bodies /docs offers to "Try it out": OpenAPI media-type examples that prme_api.http attaches
# to each route. They are kept out of the models' JSON schemas, which are also the MCP tools' input
# schemas. tests/api/test_api_docs.py sends every one and expects no 422. The bundle, ablation and
# two reports are what the API returned for EXAMPLE_OWNER with one memory (EXAMPLE_NODE_ID) and one
# holdout query; when a model change makes them fail to load, make them again the same way
# (store the memory, retrieve with include_bundle, ablate it, register the query, POST
# /v1/learning/evaluate, then /v1/learning/holdout with that proposal).

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

_BUNDLE_EXAMPLE: dict[str, Any] = {
    "schema_version": 1,
    "tokenizer": "prme-regex-v1",
    "context_format": "auditable",
    "context_guidance_mode": "off",
    "multipath_ordering": "balanced",
    "min_fidelity": "prose",
    "token_budget": 256,
    "reference_time": "2026-12-07T09:00:00Z",
    "header": '{"context":"prme","format":"auditable","reference_time":"2026-12-07T09:00:00Z"}',
    "guidance": None,
    "entries": [
        {
            "node_id": "5f0c3a52-8d4e-4c1b-9a6e-2b7d9e1f4a10",
            "ref": 1,
            "rank": 0,
            "representation": "full",
            "text": '{"content":"The cat\'s annual checkup at the vet costs 80 euros","epistemic":"asserted","id":"5f0c3a52-8d4e-4c1b-9a6e-2b7d9e1f4a10","recorded":"2026-12-04T23:01:58.992732Z","ref":1,"scope":"personal","time":"2026-11-03T09:30:00Z","type":"fact"}',
            "token_cost": 100,
            "has_content": True,
        }
    ],
    "excluded_ids": [],
    "tokens_used": 133,
    "budget_remaining": 123,
}
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
_PROPOSAL_EXAMPLE: dict[str, Any] = {
    "schema_version": 3,
    "algorithm": "pool_ndcg_search_v2",
    "split_algorithm": "sha256-seeded-group-hash-v1",
    "bootstrap_algorithm": "numpy-pcg64-percentile-v1",
    "owner": "example-owner",
    "scopes": ["personal"],
    "surface": "results",
    "config": {
        "seed": 42,
        "validation_fraction": 0.3,
        "min_training_queries": 20,
        "min_validation_queries": 20,
        "regularization": 0.01,
        "margin_scale": 5.0,
        "passes_per_step": 4,
        "ndcg_k": 10,
        "bootstrap_samples": 2000,
        "min_ndcg_gain": 0.01,
        "max_pairs_per_request": 10000,
        "fit": "auto",
        "family": "multipliers_interactions_v2",
        "pool_regularization": 0.001,
        "max_fit_requests": 1000,
        "search_starts": 32,
        "ndcg_margin": 0.02,
        "max_group_requests": 20,
        "max_p_value": 0.025,
        "crossfit_folds": 3,
    },
    "snapshot_sha256": "d87603851d127892feb89197b7b9968a5804db6b5af03256ba3b3ecd75bc4469",
    "input_checksum": "39feac59424e3c32cc9ba27e5acb3a595b34112923e2c5ba35624bfe76fe7cc2",
    "query_groups": {},
    "feedback_ids": [],
    "receipt_checksums": {},
    "multipliers": {"semantic": 1.0, "lexical": 1.0, "graph": 1.0, "recency": 1.0, "salience": 1.0, "confidence": 1.0},
    "decision": "insufficient_data",
    "training_loss_before": None,
    "training_loss_after": None,
    "validation_ndcg_gain": None,
    "validation_pairwise_gain": None,
    "validation_gain_interval": None,
    "coverage": {
        "feedback_records": 0,
        "requests_with_pairs": 0,
        "training_queries": 0,
        "validation_queries": 0,
        "explicit_pairs": 0,
    },
    "exclusions": {},
    "queries": [],
    "limitations": list(OFFLINE_LIMITATIONS),
    "family": "multipliers_interactions_v2",
    "fit_path": "pool",
    "fit_reason": "0 of 0 usable requests re-ranked from their recorded pools",
    "metric": "pool_judged_ndcg",
}
_HOLDOUT_EXAMPLE: dict[str, Any] = {
    "schema_version": 3,
    "algorithm": "paired_full_retrieval_v1",
    "bootstrap_algorithm": "numpy-pcg64-percentile-v1",
    "owner": "example-owner",
    "scopes": ["personal"],
    "surface": "results",
    "config": {
        "seed": 42,
        "k": 10,
        "min_query_groups": 20,
        "bootstrap_samples": 2000,
        "min_ndcg_gain": 0.01,
        "max_regression_fraction": 0.1,
        "max_mean_harm": 0.02,
        "severe_loss": 0.5,
        "max_severe_share": 0.05,
        "max_p_value": 0.025,
        "look": 1,
        "alpha_budget": 0.05,
    },
    "proposal_input_checksum": "39feac59424e3c32cc9ba27e5acb3a595b34112923e2c5ba35624bfe76fe7cc2",
    "memory_artifact_sha256": "3d5f6f25c08a498cbc9cce314ddc6d4ac9cf94977880cbcb3052d81ac8667d2d",
    "input_checksum": "3195f3f337fded8739c1d0dae555462439641b50e6176270ee11bd7872d6d793",
    "receipt_checksums": {
        "61975157-0d54-4e1f-9e52-12d6d35be275": "fe052153d7248f8bb7399daba477721ecdf85bb2cf60ea67dd0676505a3f8757",
        "e3bd3f07-850c-4b1b-9ca9-b533ba35115e": "2e6776ba9d0b353c658d4b764da73c422428a6822160ef4fb9f59ff490f294b1",
    },
    "feature_identity": {
        "python": "3.11.7",
        "trace_layout": [
            "semantic",
            "lexical",
            "graph",
            "recency",
            "salience",
            "confidence",
            "epistemic_weight",
            "temporal_affinity",
            "node_type_boost",
            "term_coverage",
            "bigram_overlap",
            "entity_match",
            "path_score",
            "base_score",
        ],
        "packages": {
            "prme-learning": "0.1.0",
            "numpy": "2.4.6",
            "bm25s": "0.3.16",
            "pydantic": "2.14.4",
            "orjson": "3.13.0",
            "duckdb": "2.0.1",
        },
        "source_sha256": {
            "formula": "4f889247e03f34df2eef2afcb35576d3ee06d93bd29dfb59df1d6ed2e74bb96f",
            "multipliers": "8fc6166a1a6869a495044d72d4021c68b7d75b4885cd7eb2811ee67e5950f9e0",
            "scoring": "5010bbb9ddf218d169dcbe8709b7cfb73bad07bcf0d2fdc6af0f0a7cdd553bf0",
            "query_analysis": "37d7c15c473a090aac3b976163281edc7216c1fb1c41746a796f66bccdeb97b1",
            "candidates": "a85873261ab40c2883aca3d50f791b2a0da8fed191485bd52c08aeb28dd96324",
            "corpus": "35ded005f3ce4d871af03960c726b0975faaa967d823544c4b3cc6799cab9426",
            "session_context": "e9d312f9d4bcc8bac01e50c064092acdf419cfb9c4288a57c2da135fb480910b",
            "ranked": "9c67c95ca7e472f9f2b7a5280a7ac0a0d05e766290c5335ca3711a13b6063dca",
            "ranking": "61e270808b6b49bcf1ba53e7aef28c08506217922a667877bf67e2149b92b264",
            "interaction": "14a96efeaff59e86d7929b5cb4410842ba025eb7d27e9be3920ac2a8e0c6eb95",
            "reranker": "dcd35aabb6239e80d6c4444f4f42f42b408bed580d46590e01c80c7935d486e5",
            "packing": "73fde71759afba54c9d70414cbf1cc941352a8f7820db57ba24fa98675e96772",
            "rendering": "09419fcdbc630b271e69c974cca422412665e3e2dde65bd4d186f2799309a8c9",
            "text": "0e5f63e3dedf2fb7c48d8271802ddbf7a6e4c7cbd9159400bec4b6b64309048c",
            "embedding": "006bb07310aa1b93596512b1cea9b6b86744bafd2873a36a72f868e6bdf472e4",
            "tokenizer": "459c64ee5153477624b918df6e216114a2bd7473fe7ffb616a592a45ac6caf73",
            "pipeline": "cfce6f1ed9663c7908a4f2ccab1e59e3595d1c112319e99255216d7179229844",
        },
        "embedding": {"provider": "prme.hashed", "model": "hashed-ngrams", "version": "1", "dimension": 384},
        "lexical": {
            "backend": "bm25s",
            "version": "0.3.16",
            "k1": 0.9,
            "b": 0.2,
            "method": "lucene",
            "analyzer": "prme-lexical-v1",
        },
        "tokenizer": {"tokenizer": "prme-regex-v1", "pattern": "\\w+|[^\\w\\s]"},
        "storage": {"backend": "duckdb", "implementation": "DuckDBStore"},
        "reranker": {"enabled": False},
    },
    "feature_identity_sha256": "8b2f7dd7745de8397d6311d7c824058ee8fb5b1c7f08c5d9f8503287a2ca3ddc",
    "base_scoring": {
        "semantic": 0.25,
        "lexical": 0.2,
        "graph": 0.2,
        "recency": 0.1,
        "salience": 0.1,
        "confidence": 0.15,
        "recency_lambda": 0.02,
        "temporal_boost": 0.15,
        "relevance_floor": 0.35,
        "current_update_multiplier": 1.3,
        "node_type_boosts": {"fact": 1.15, "preference": 1.15, "decision": 1.15, "instruction": 1.15, "summary": 1.1},
        "fusion": "weighted",
        "rrf_k": 60,
        "term_coverage": 0.0,
        "bigram_overlap": 0.0,
        "entity_match": 0.0,
    },
    "baseline_multipliers": {
        "semantic": 1.0,
        "lexical": 1.0,
        "graph": 1.0,
        "recency": 1.0,
        "salience": 1.0,
        "confidence": 1.0,
    },
    "candidate_multipliers": {
        "semantic": 1.0,
        "lexical": 1.0,
        "graph": 1.0,
        "recency": 1.0,
        "salience": 1.0,
        "confidence": 1.0,
    },
    "decision": "insufficient_data",
    "baseline_recall": 1.0,
    "candidate_recall": 1.0,
    "recall_gain": 0.0,
    "baseline_ndcg": 1.0,
    "candidate_ndcg": 1.0,
    "ndcg_gain": 0.0,
    "baseline_mrr": 1.0,
    "candidate_mrr": 1.0,
    "mrr_gain": 0.0,
    "ndcg_gain_interval": None,
    "regression_fraction": 0.0,
    "coverage": {"trials": 1, "query_groups": 1, "relevant_nodes": 1},
    "trials": [
        {
            "group_id": "5a0a505400a79d33f1c13089fdc821f0556ede459f0eaf069008bd9a179fa805",
            "baseline_request_id": "61975157-0d54-4e1f-9e52-12d6d35be275",
            "candidate_request_id": "e3bd3f07-850c-4b1b-9ca9-b533ba35115e",
            "relevant_node_ids": ["5f0c3a52-8d4e-4c1b-9a6e-2b7d9e1f4a10"],
        }
    ],
    "queries": [
        {
            "group_id": "5a0a505400a79d33f1c13089fdc821f0556ede459f0eaf069008bd9a179fa805",
            "baseline_request_ids": ["61975157-0d54-4e1f-9e52-12d6d35be275"],
            "candidate_request_ids": ["e3bd3f07-850c-4b1b-9ca9-b533ba35115e"],
            "baseline_recall": 1.0,
            "candidate_recall": 1.0,
            "baseline_ndcg": 1.0,
            "candidate_ndcg": 1.0,
            "baseline_mrr": 1.0,
            "candidate_mrr": 1.0,
        }
    ],
    "limitations": list(HOLDOUT_LIMITATIONS),
    "harm": 0.0,
    "benefit": 0.0,
    "severe_share": 0.0,
    "sign_flip_p": 1.0,
}


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
