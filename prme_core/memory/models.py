"""Memory nodes, typed edges and the input a caller supplies to store one.

Bounds are explicit and documented in the README ("Limits"):

* content: 1..65,536 bytes of UTF-8 (``MAX_CONTENT_BYTES``), not blank;
* metadata: a JSON object of at most 16,384 canonical bytes (``MAX_METADATA_BYTES``);
* session id: at most 256 characters; salience and confidence in [0, 1];
* no NUL character in content, session id or metadata keys and strings (PostgreSQL text cannot
  hold one, so both backends refuse it);
* event, validity and creation times must be timezone-aware.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any
from uuid import UUID

from pydantic import Field, StringConstraints, field_validator, model_validator

from prme_core.canonical import canonical_json, sha256_hex
from prme_core.types import (
    NUL_MESSAGE,
    SCOPE_NAME_PATTERN,
    FrozenModel,
    NonBlank,
    NulFree,
    Owner,
    Sha256Hex,
    SortedUnique,
    UtcDatetime,
    nul_location,
)
from prme_core.validation import check_nesting

MAX_CONTENT_BYTES = 65_536
MAX_METADATA_BYTES = 16_384
MAX_SESSION_ID_CHARS = 256
DEFAULT_SCOPES: tuple[str, ...] = ("personal", "project", "organization", "agent")

ScopeName = Annotated[str, StringConstraints(pattern=SCOPE_NAME_PATTERN)]
ScopeSet = Annotated[tuple[ScopeName, ...], Field(min_length=1), SortedUnique]
"""An exact scope set as recorded: one or more scope names, sorted and unique."""


class NodeType(str, Enum):
    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    EVENT = "event"
    NOTE = "note"
    INSTRUCTION = "instruction"
    SUMMARY = "summary"
    ENTITY = "entity"
    TASK = "task"


class EpistemicType(str, Enum):
    OBSERVED = "observed"
    ASSERTED = "asserted"
    INFERRED = "inferred"
    HYPOTHETICAL = "hypothetical"
    CONDITIONAL = "conditional"
    DEPRECATED = "deprecated"
    UNVERIFIED = "unverified"


class Lifecycle(str, Enum):
    TENTATIVE = "tentative"
    STABLE = "stable"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"


ACTIVE_LIFECYCLES = (Lifecycle.TENTATIVE, Lifecycle.STABLE)


class EdgeType(str, Enum):
    RELATES_TO = "relates_to"
    SUPERSEDES = "supersedes"
    DERIVED_FROM = "derived_from"
    PART_OF = "part_of"
    MENTIONS = "mentions"
    SUPPORTS = "supports"
    CONTRADICTS = "contradicts"
    FOLLOWS = "follows"


def content_sha256(content: str) -> str:
    """SHA-256 hex of a node's content as UTF-8."""
    return sha256_hex(content)


def _check_content(value: str) -> str:
    size = len(value.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise ValueError(f"content is {size} bytes; the bound is {MAX_CONTENT_BYTES} bytes of UTF-8")
    return value


def _check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    size = len(canonical_json(value))
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is {size} canonical bytes; the bound is {MAX_METADATA_BYTES}")
    return value


def _check_stored_metadata(value: dict[str, Any]) -> dict[str, Any]:
    check_nesting(value, "metadata")  # first: the bound, named, before anything walks the value
    where = nul_location(value, "metadata")
    if where is not None:
        raise ValueError(f"{where} {NUL_MESSAGE}")
    return _check_metadata(value)


class MemoryInput(FrozenModel):
    """What a caller supplies to store one memory (owner and clock come from the engine)."""

    content: Annotated[str, NulFree, NonBlank]
    scope: ScopeName = "personal"
    node_type: NodeType = NodeType.NOTE
    session_id: Annotated[str, StringConstraints(min_length=1, max_length=MAX_SESSION_ID_CHARS), NulFree] | None = None
    event_time: UtcDatetime | None = None
    valid_from: UtcDatetime | None = None
    valid_to: UtcDatetime | None = None
    salience: float = Field(default=0.5, ge=0.0, le=1.0)
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)
    epistemic_type: EpistemicType = EpistemicType.ASSERTED
    lifecycle: Lifecycle = Lifecycle.STABLE
    metadata: dict[str, Any] = Field(default_factory=dict)
    id: UUID | None = None

    @field_validator("content")
    @classmethod
    def _content_bounds(cls, value: str) -> str:
        return _check_content(value)

    @field_validator("metadata")
    @classmethod
    def _metadata_bounds(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_stored_metadata(value)

    @model_validator(mode="after")
    def _coherent(self) -> MemoryInput:
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValueError("valid_to must be later than valid_from")
        return self

    @field_validator("lifecycle")
    @classmethod
    def _starts_active(cls, value: Lifecycle) -> Lifecycle:
        if value not in ACTIVE_LIFECYCLES:
            raise ValueError("a new memory starts tentative or stable; use supersede() or archive() later")
        return value


class MemoryNode(FrozenModel):
    """One version of a stored memory. Versions are immutable; a change writes version + 1."""

    id: UUID
    owner: Owner
    version: int = Field(ge=1)
    scope: ScopeName
    node_type: NodeType
    content: str
    content_hash: Sha256Hex
    session_id: str | None = None
    event_time: UtcDatetime | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime
    valid_from: UtcDatetime | None = None
    valid_to: UtcDatetime | None = None
    salience: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)
    epistemic_type: EpistemicType
    lifecycle: Lifecycle
    metadata: dict[str, Any] = Field(default_factory=dict)
    superseded_by: UUID | None = None

    @model_validator(mode="after")
    def _hash_matches(self) -> MemoryNode:
        if content_sha256(self.content) != self.content_hash:
            raise ValueError("content_hash does not match the content")
        return self

    @property
    def is_active(self) -> bool:
        return self.lifecycle in ACTIVE_LIFECYCLES


class Edge(FrozenModel):
    """A typed, directed edge between two nodes of the same owner."""

    id: UUID
    owner: Owner
    source_id: UUID
    target_id: UUID
    edge_type: EdgeType
    weight: float = Field(default=1.0, gt=0.0, le=1.0)
    created_at: UtcDatetime
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _metadata_bounds(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_metadata(value)

    @model_validator(mode="after")
    def _not_a_loop(self) -> Edge:
        if self.source_id == self.target_id:
            raise ValueError("an edge must join two different nodes")
        return self


class Page(FrozenModel):
    """One bounded page of a scan; pass ``next_cursor`` back to continue."""

    items: tuple[MemoryNode, ...]
    next_cursor: str | None = None
