"""What a retrieval takes and gives: the validated request, its arguments' checks
(``build_request``), and the response (results, bundle, receipt, metadata).

Everything that calls ``retrieve`` — the Python client, the HTTP routes, the MCP tools, the
holdout runner — imports these types from here, not from the pipeline that runs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    create_model,
    model_validator,
)

from prme_core.errors import InvalidInput, UnsupportedOperation
from prme_core.memory.models import ScopeName
from prme_core.receipts.model import RetrievalReceipt
from prme_core.retrieval.config import MAX_TOKEN_BUDGET, Fidelity, PackingConfig, ScoringWeights
from prme_core.retrieval.multipliers import RankingMultipliers
from prme_core.retrieval.packing import ContextBundle
from prme_core.types import (
    FrozenModel,
    NonBlank,
    Normalized,
    NulFree,
    Owner,
    UtcDatetime,
    WindowEnd,
    utc_now,
)
from prme_core.validation import check_owner, check_scope_set, parse_model

MAX_QUERY_CHARS = 4096
MAX_RESULT_LIMIT = 200

QueryText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS), NulFree, NonBlank]
"""A query as a caller writes it: 1..4096 characters, not blank, no NUL."""

EpistemicMode = Literal["all", "reliable", "observed"]
EPISTEMIC_MODES: dict[str, frozenset[str] | None] = {
    "all": None,
    "reliable": frozenset({"observed", "asserted", "inferred"}),
    "observed": frozenset({"observed"}),
}
"""Which memories a retrieval may return by their epistemic type: ``all`` (the default);
``reliable`` leaves out hypothetical, conditional, deprecated and unverified memories; ``observed``
keeps observed ones only. A filter on eligibility, like the time windows: it never reweights."""


class RetrievalRequest(FrozenModel):
    """A validated retrieval request (every bound explicit)."""

    query: QueryText
    owner: Owner
    scopes: Annotated[tuple[ScopeName, ...], Field(min_length=1), Normalized]
    reference_time: UtcDatetime
    limit: StrictInt = Field(default=20, ge=1, le=MAX_RESULT_LIMIT)
    min_score: StrictFloat = Field(default=0.0, ge=0.0, le=10.0)
    time_from: UtcDatetime | None = None
    time_to: WindowEnd = None
    event_time_from: UtcDatetime | None = None
    event_time_to: WindowEnd = None
    scoring: ScoringWeights
    packing: PackingConfig
    ranking_multipliers: RankingMultipliers | None = None
    include_cross_scope: StrictBool = False
    retrieval_mode: Annotated[str, StringConstraints(pattern="^(hybrid|lexical|semantic)$")] = "hybrid"
    epistemic_mode: EpistemicMode = "all"

    @model_validator(mode="after")
    def _coherent(self) -> RetrievalRequest:
        if (
            self.scoring.fusion == "rrf"
            and self.ranking_multipliers is not None
            and not self.ranking_multipliers.is_unity()
        ):
            raise ValueError("ranking multipliers adjust the weighted formula and do not apply to fusion='rrf'")
        return self


@cache
def overrides_of(model: type[BaseModel]) -> type[BaseModel]:
    """A model of optional overrides of ``model``'s fields (same types and bounds, every field
    optional): what a request may change of an engine default (``scoring``, ``packing``)."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
        fields[name] = (annotation | None, Field(default=None, description=info.description))
    return create_model(
        f"{model.__name__}Overrides",
        __base__=FrozenModel,
        __doc__=f"Fields of {model.__name__} to change for this request; the engine's defaults fill the rest.",
        **fields,
    )


ScoringOverrides = overrides_of(ScoringWeights)
PackingOverrides = overrides_of(PackingConfig)


class RetrieveArguments(FrozenModel):
    """Every argument of a retrieval but the query and the owner, declared once: the Python
    client (``MemoryClient.retrieve``), the HTTP route and the MCP tools all take these."""

    scopes: Annotated[tuple[ScopeName, ...], Field(min_length=1, max_length=64), Normalized] | None = Field(
        default=None, description="Scopes to search (an exact set); default every scope the caller may read."
    )
    reference_time: UtcDatetime | None = Field(
        default=None, description="The time the question is asked at (timezone-aware); default now."
    )
    limit: StrictInt = Field(default=20, ge=1, le=MAX_RESULT_LIMIT, description="How many memories to return.")
    min_score: StrictFloat = Field(default=0.0, ge=0.0, le=10.0, description="Drop memories scoring below this.")
    token_budget: StrictInt | None = Field(
        default=None, ge=16, le=MAX_TOKEN_BUDGET, description="Tokens the packed context may use; default the engine's."
    )
    time_from: UtcDatetime | None = Field(default=None, description="Only memories still valid at or after this time.")
    time_to: WindowEnd = Field(default=None, description="Only memories already valid at or before this time.")
    event_time_from: UtcDatetime | None = Field(default=None, description="Only events at or after this time.")
    event_time_to: WindowEnd = Field(default=None, description="Only events at or before this time.")
    min_fidelity: Fidelity | None = Field(
        default=None, description="The least detail a packed memory may keep (full, prose, reference)."
    )
    scoring: ScoringOverrides | None = Field(  # type: ignore[valid-type]
        default=None, description="Scoring weights to change for this request (experts; recorded in the receipt)."
    )
    packing: PackingOverrides | None = Field(  # type: ignore[valid-type]
        default=None, description="Packing settings to change for this request (experts)."
    )
    ranking_multipliers: RankingMultipliers | None = Field(
        default=None, description="Explicit ranking multipliers for this request (override any active profile)."
    )
    include_cross_scope: StrictBool = Field(
        default=False, description="Also search the owner's other scopes (needs a key without a scope limit)."
    )
    retrieval_mode: Literal["hybrid", "lexical", "semantic"] = Field(
        default="hybrid", description="Candidate channels: both, BM25 only, or embeddings only."
    )
    epistemic_mode: EpistemicMode = Field(
        default="all",
        description="Which memories by epistemic type: all; reliable (no hypothetical, conditional, deprecated or "
        "unverified ones); observed only.",
    )


@dataclass(frozen=True)
class RetrievedMemory:
    """One returned memory, in rank order."""

    node_id: UUID
    rank: int
    score: float
    content: str
    scope: str
    node_type: str
    session_id: str | None
    event_time: UtcDatetime | None
    paths: tuple[str, ...]
    cross_scope: bool
    in_context: bool
    representation: str | None


class RetrievalMetadata(FrozenModel):
    request_id: UUID
    receipt_persisted: bool
    receipt_checksum: str | None
    receipt_error: str | None = None
    schema_version: int
    ranking_policy: str
    ranking_multipliers: dict[str, float] | None
    ranking_profile_id: UUID | None
    ranking_profile_status: str
    ranking_profile_reason: str | None
    candidate_pool_size: int
    context_tokens: int
    context_sha256: str
    duration_ms: float


@dataclass(frozen=True)
class RetrievalResponse:
    """What ``retrieve`` returns: results, the packed bundle, the receipt and metadata.

    A plain frozen dataclass: its parts are validated models already, and nesting them in
    another pydantic model would re-run their (replay-checking) validators.
    """

    results: tuple[RetrievedMemory, ...]
    bundle: ContextBundle
    receipt: RetrievalReceipt
    metadata: RetrievalMetadata

    @property
    def context(self) -> str:
        """The exact rendered context whose SHA-256 is the receipt's context hash."""
        return self.bundle.render()


@dataclass(frozen=True)
class ProfileResolution:
    """Which request-local multipliers apply and why (see profiles.resolution)."""

    status: str  # none | applied | inapplicable | request_override
    multipliers: RankingMultipliers | None = None
    profile_id: UUID | None = None
    reason: str | None = None

    def as_parameters(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "profile_id": str(self.profile_id) if self.profile_id else None,
            "reason": self.reason,
        }


def build_request(
    owner: Any,
    query: Any,
    arguments: RetrieveArguments | Mapping[str, Any] | None = None,
    *,
    default_scopes: tuple[str, ...],
    default_scoring: ScoringWeights,
    default_packing: PackingConfig,
) -> RetrievalRequest:
    """Validate a retrieval's arguments into a request; raise ``InvalidInput`` naming the field.

    ``arguments`` is a ``RetrieveArguments`` or a mapping of its fields (``scoring`` and
    ``packing`` may also be whole ``ScoringWeights``/``PackingConfig`` models)."""
    owner = check_owner(owner)
    raw = dict(arguments) if isinstance(arguments, Mapping) else ({} if arguments is None else None)
    whole = {}
    if raw is not None:
        for name, model in (("scoring", ScoringWeights), ("packing", PackingConfig)):
            if isinstance(raw.get(name), model):
                whole[name] = raw.pop(name)
    args = arguments if raw is None else parse_model(RetrieveArguments, raw, "")
    assert isinstance(args, RetrieveArguments)
    scopes = check_scope_set(default_scopes if args.scopes is None else args.scopes, allowed=default_scopes)
    scoring_model = _merged(ScoringWeights, default_scoring, whole.get("scoring", args.scoring), "scoring")
    packing_updates: dict[str, Any] = {}
    if args.token_budget is not None:
        packing_updates["token_budget"] = args.token_budget
    if args.min_fidelity is not None:
        packing_updates["min_fidelity"] = args.min_fidelity
    packing_model = _merged(
        PackingConfig, default_packing, whole.get("packing", args.packing), "packing", extra=packing_updates
    )
    multipliers = args.ranking_multipliers
    if multipliers is not None and scoring_model.fusion == "rrf" and not multipliers.is_unity():
        raise UnsupportedOperation(
            "ranking_multipliers: they adjust the weighted formula and do not apply to fusion='rrf'"
        )
    return parse_model(
        RetrievalRequest,
        {
            **args.model_dump(exclude={"scopes", "scoring", "packing", "token_budget", "min_fidelity"}),
            "query": query,
            "owner": owner,
            "scopes": tuple(scopes),
            "reference_time": utc_now() if args.reference_time is None else args.reference_time,
            "scoring": scoring_model,
            "packing": packing_model,
            "ranking_multipliers": multipliers,
        },
        "",
    )


def _merged(model: type, default: Any, override: Any, field: str, extra: Mapping[str, Any] | None = None) -> Any:
    if isinstance(override, model):
        base = override.model_dump()
    elif override is None:
        if not extra and type(default) is model:
            return default  # validated when it was made, and immutable: validating its dump again yields it
        base = default.model_dump()
    elif isinstance(override, BaseModel):  # a validated overrides model: only the fields it sets
        base = {**default.model_dump(), **override.model_dump(exclude_none=True)}
    elif isinstance(override, Mapping):
        base = {**default.model_dump(), **dict(override)}
    else:
        raise InvalidInput(field, f"must be a {model.__name__} or a mapping of its fields")
    if extra:
        base.update(extra)
    return parse_model(model, base, field)
