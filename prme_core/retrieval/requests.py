"""What a retrieval takes and gives: the validated request, its arguments' checks
(``build_request``), and the response (results, bundle, receipt, metadata).

Everything that calls ``retrieve`` — the Python client, the HTTP routes, the MCP tools, the
holdout runner — imports these types from here, not from the pipeline that runs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StringConstraints, model_validator

from prme_core.errors import InvalidInput, UnsupportedOperation
from prme_core.memory.models import ScopeName
from prme_core.receipts.model import RetrievalReceipt
from prme_core.retrieval.config import Fidelity, PackingConfig, ScoringWeights
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
    *,
    scopes: Any,
    default_scopes: tuple[str, ...],
    default_scoring: ScoringWeights,
    default_packing: PackingConfig,
    reference_time: Any = None,
    limit: Any = 20,
    min_score: Any = 0.0,
    token_budget: Any = None,
    time_from: Any = None,
    time_to: Any = None,
    event_time_from: Any = None,
    event_time_to: Any = None,
    min_fidelity: Fidelity | None = None,
    scoring: Any = None,
    packing: Any = None,
    ranking_multipliers: Any = None,
    include_cross_scope: Any = False,
    retrieval_mode: Any = "hybrid",
    epistemic_mode: Any = "all",
) -> RetrievalRequest:
    """Validate retrieve() arguments into a request; raise ``InvalidInput`` naming the field."""
    owner = check_owner(owner)
    scopes = check_scope_set(default_scopes if scopes is None else scopes, allowed=default_scopes)
    scoring_model = _merged(ScoringWeights, default_scoring, scoring, "scoring")
    packing_updates: dict[str, Any] = {}
    if token_budget is not None:
        packing_updates["token_budget"] = token_budget
    if min_fidelity is not None:
        packing_updates["min_fidelity"] = min_fidelity
    packing_model = _merged(PackingConfig, default_packing, packing, "packing", extra=packing_updates)
    multipliers = (
        None
        if ranking_multipliers is None
        else parse_model(RankingMultipliers, ranking_multipliers, "ranking_multipliers")
    )
    if multipliers is not None and scoring_model.fusion == "rrf" and not multipliers.is_unity():
        raise UnsupportedOperation(
            "ranking_multipliers: they adjust the weighted formula and do not apply to fusion='rrf'"
        )
    return parse_model(
        RetrievalRequest,
        {
            "query": query,
            "owner": owner,
            "scopes": tuple(scopes),
            "reference_time": utc_now() if reference_time is None else reference_time,
            "limit": limit,
            "min_score": min_score,
            "time_from": time_from,
            "time_to": time_to,
            "event_time_from": event_time_from,
            "event_time_to": event_time_to,
            "scoring": scoring_model,
            "packing": packing_model,
            "ranking_multipliers": multipliers,
            "include_cross_scope": include_cross_scope,
            "retrieval_mode": retrieval_mode,
            "epistemic_mode": epistemic_mode,
        },
        "",
    )


def _merged(model: type, default: Any, override: Any, field: str, extra: Mapping[str, Any] | None = None) -> Any:
    if isinstance(override, model):
        base = override.model_dump()
    elif override is None:
        base = default.model_dump()
    elif isinstance(override, Mapping):
        base = {**default.model_dump(), **dict(override)}
    else:
        raise InvalidInput(field, f"must be a {model.__name__} or a mapping of its fields")
    if extra:
        base.update(extra)
    return parse_model(model, base, field)
