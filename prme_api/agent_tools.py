"""The agent tool set: the few MCP tools an agent needs in every session, small enough to cost
little context, each saying when to call it.

An agent searches before answering from memory, judges the results after answering (the ones it
used are relevant, the others it was shown are not: feedback learning can use), stores what the
user says is worth keeping, reads one memory, and asks whom it serves. Operators get the full
operation set (``service.OPERATIONS``) beside these.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated
from uuid import UUID

from mcp import types
from pydantic import BaseModel, Field, StrictInt

from prme_api.models import Body, NoArguments, ScopeList
from prme_core.memory.models import ScopeName
from prme_core.retrieval.requests import QueryText
from prme_core.types import UtcDatetime

MAX_CONTENT_CHARS = 8192


class SearchArgs(Body):
    query: QueryText = Field(description="The question to answer, in the user's words.")
    limit: StrictInt = Field(default=8, ge=1, le=50, description="How many memories to return (default 8).")
    scopes: ScopeList | None = Field(
        default=None, description="Scopes to search; default every scope the key may read."
    )
    reference_time: UtcDatetime | None = Field(
        default=None, description="When the question is asked, ISO 8601 with a timezone; default now."
    )


class FoundMemory(BaseModel):
    node_id: UUID = Field(description="Pass to memory_judge if your answer used it.")
    content: str
    score: float
    event_time: datetime | None = Field(description="When it happened, if known.")


class SearchOut(BaseModel):
    request_id: UUID = Field(description="Pass to memory_judge after answering.")
    results: list[FoundMemory]


class JudgeArgs(Body):
    request_id: UUID = Field(description="request_id of the memory_search you answered from.")
    used: Annotated[list[UUID], Field(max_length=200)] = Field(
        description="node_ids of the results your answer used; [] if none helped. The other results are "
        "recorded as not relevant."
    )


class JudgeOut(BaseModel):
    feedback_id: UUID
    relevant: int
    not_relevant: int
    usable_for_learning: bool
    reason: str = Field(description="Why ranking can or cannot learn from this judgment.")


class StoreArgs(Body):
    content: Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)] = Field(
        description="One fact, preference, decision or plan, as a plain sentence."
    )
    scope: ScopeName | None = Field(default=None, description="Where to keep it; default the engine's default scope.")
    event_time: UtcDatetime | None = Field(default=None, description="When it happened, ISO 8601 with a timezone.")


class StoreOut(BaseModel):
    node_id: UUID
    scope: str


class GetArgs(Body):
    node_id: UUID = Field(description="A node_id from memory_search.")


class MemoryOut(BaseModel):
    node_id: UUID
    content: str
    scope: str
    event_time: datetime | None
    created_at: datetime


class WhoamiOut(BaseModel):
    key_id: str
    owner: str
    role: str
    scopes: list[str] | None = Field(description="The key's scope limit; null: every configured scope.")
    expires_at: datetime | None
    configured_scopes: list[str]


@dataclass(frozen=True)
class AgentTool:
    name: str
    title: str
    description: str
    model: type[BaseModel]
    output: type[BaseModel]
    method: str
    read_only: bool
    idempotent: bool

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.model.model_json_schema(),
            output_schema=self.output.model_json_schema(),
            annotations=types.ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=False,
                idempotent_hint=self.idempotent,
                open_world_hint=False,
            ),
        )


AGENT_TOOLS: tuple[AgentTool, ...] = (
    AgentTool(
        "memory_search",
        "Search memory",
        "Call before answering anything that may depend on what the user said earlier (facts about them, "
        "their plans, preferences, past events). Returns the most relevant memories and a request_id.",
        SearchArgs,
        SearchOut,
        "agent_search",
        read_only=False,  # it saves the retrieval's receipt
        idempotent=False,
    ),
    AgentTool(
        "memory_judge",
        "Judge the results you used",
        "Call once after answering from a memory_search: list the node_ids your answer used. They count as "
        "relevant and the other results shown as not, so later searches rank better for this user.",
        JudgeArgs,
        JudgeOut,
        "agent_judge",
        read_only=False,
        idempotent=True,  # one judgment per search; a retry returns it
    ),
    AgentTool(
        "memory_remember",
        "Remember",
        "Call when the user tells you something worth remembering later; one fact per call.",
        StoreArgs,
        StoreOut,
        "agent_store",
        read_only=False,
        idempotent=False,
    ),
    AgentTool(
        "memory_read",
        "Read one memory",
        "Call to read one memory in full by its node_id, for example to quote it.",
        GetArgs,
        MemoryOut,
        "agent_get",
        read_only=True,
        idempotent=True,
    ),
    AgentTool(
        "memory_whoami",
        "Who am I serving",
        "Call when you need to know which user and scopes this key serves.",
        NoArguments,
        WhoamiOut,
        "whoami",
        read_only=True,
        idempotent=True,
    ),
)
"""The agent tool set (agent keys see exactly these)."""
