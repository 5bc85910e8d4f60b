"""The token-budgeted context bundle: which returned memories are shown, how, and in what order.

Packing is greedy and never truncates: each memory, in policy order, takes the richest
representation (``full`` → ``prose`` → ``reference``, down to ``min_fidelity``) that still fits
the remaining budget, or is excluded. Budgets are counted line by line, which equals the count
of the rendered bundle because tokens never span the ``\\n`` between lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import Field, model_validator

from prme_core.canonical import sha256_hex
from prme_core.errors import InvalidInput
from prme_core.retrieval.config import (
    FIDELITY_ORDER,
    MAX_TOKEN_BUDGET,
    ContextFormat,
    Fidelity,
    GuidanceMode,
    Ordering,
    PackingConfig,
)
from prme_core.retrieval.rendering import (
    TEXT_REPRESENTATIONS,
    PackItem,
    Representation,
    guidance_text,
    render_entry,
    render_header,
)
from prme_core.retrieval.tokenizer import TOKENIZER_ID, count_tokens
from prme_core.types import FrozenModel, UtcDatetime

PRIORITY_NODE_TYPES = frozenset({"instruction", "preference"})
"""Node types packed before everything else (tier 0), whatever their rank."""

LONG_ENTRY_PENALTY = 0.25
"""Balanced ordering: the most an entry's score is discounted for its length (see ``_balanced``)."""


class ContextEntry(FrozenModel):
    """One packed memory: its ``[ref]`` in the context, its line and what that line costs."""

    node_id: UUID
    ref: int = Field(ge=1)
    rank: int = Field(ge=0)
    representation: Representation
    text: str
    token_cost: int = Field(ge=0)
    has_content: bool

    @model_validator(mode="after")
    def _consistent(self) -> ContextEntry:
        if self.has_content != (self.representation in TEXT_REPRESENTATIONS):
            raise ValueError(f"has_content must be {not self.has_content} for a {self.representation!r} entry")
        if "\n" in self.text or "\r" in self.text:
            raise ValueError("text must be a single line (no \\n or \\r); render it with render_entry()")
        # token_cost is verified by the bundle, which counts every entry exactly once.
        return self


class ContextBundle(FrozenModel):
    """The rendered context of one retrieval, with the settings and budget it was packed under."""

    schema_version: Literal[1] = 1
    tokenizer: str
    context_format: ContextFormat
    context_guidance_mode: GuidanceMode
    multipath_ordering: Ordering
    min_fidelity: Fidelity
    token_budget: int = Field(ge=16, le=MAX_TOKEN_BUDGET)
    reference_time: UtcDatetime
    header: str
    guidance: str | None
    entries: tuple[ContextEntry, ...]
    excluded_ids: tuple[UUID, ...]
    tokens_used: int = Field(ge=0)
    budget_remaining: int = Field(ge=0)

    def render(self) -> str:
        """The context text handed to the model; an empty bundle renders as ``""``."""
        if not self.entries:
            return ""
        lines = [self.header, *([self.guidance] if self.guidance else []), *(e.text for e in self.entries)]
        return "\n".join(lines)

    def context_sha256(self) -> str:
        return sha256_hex(self.render())

    def entry(self, node_id: UUID) -> ContextEntry | None:
        return next((e for e in self.entries if e.node_id == node_id), None)

    def included_ids(self) -> tuple[UUID, ...]:
        return tuple(e.node_id for e in self.entries)

    @model_validator(mode="after")
    def _consistent(self) -> ContextBundle:
        if self.tokenizer != TOKENIZER_ID:
            raise ValueError(f"tokenizer is {self.tokenizer!r}; this version can only verify {TOKENIZER_ID!r} bundles")
        refs = [e.ref for e in self.entries]
        if any(b <= a for a, b in zip(refs, refs[1:])):
            # A packed bundle numbers its entries 1..n; an ablated one keeps the survivors' refs
            # (so their bytes do not change), which leaves gaps but never reorders.
            raise ValueError(f"entry refs must increase in entry order; got {refs}")
        ids = [e.node_id for e in self.entries]
        if len(set(ids)) != len(ids) or len(set(self.excluded_ids)) != len(self.excluded_ids):
            raise ValueError("a node id may appear only once across entries and excluded_ids")
        if set(ids) & set(self.excluded_ids):
            raise ValueError("entries and excluded_ids must be disjoint")
        allowed = _fidelity_ladder(self.min_fidelity)
        if any(e.representation not in allowed for e in self.entries):
            raise ValueError(f"min_fidelity is {self.min_fidelity!r}; entries may only be {', '.join(allowed)}")
        self._check_preamble()
        for e in self.entries:
            if e.token_cost != count_tokens(e.text):
                raise ValueError(
                    f"entry {e.ref}: token_cost is {e.token_cost} but its text counts {count_tokens(e.text)}"
                )
        # Tokens never span a line break, so the rendered count is the sum of its lines' counts.
        counted = (
            (
                count_tokens(self.header)
                + (count_tokens(self.guidance) if self.guidance else 0)
                + sum(e.token_cost for e in self.entries)
            )
            if self.entries
            else 0
        )
        if self.tokens_used != counted:
            raise ValueError(f"tokens_used is {self.tokens_used} but the rendered context counts {counted}")
        if self.tokens_used > self.token_budget:
            raise ValueError(f"tokens_used {self.tokens_used} exceeds token_budget {self.token_budget}")
        if self.tokens_used + self.budget_remaining != self.token_budget:
            raise ValueError("tokens_used + budget_remaining must equal token_budget")
        return self

    def _check_preamble(self) -> None:
        if not self.entries:
            if self.header != "" or self.guidance is not None:
                raise ValueError("a bundle without entries has an empty header and no guidance")
            return
        if self.header != render_header(self.reference_time, self.context_format):
            raise ValueError("header does not match reference_time and context_format; re-pack instead of editing")
        expected = {
            guidance_text(self.context_guidance_mode, temporal_query=q, reference_time=self.reference_time)
            for q in (False, True)
        }
        if self.guidance not in expected:
            raise ValueError(f"guidance does not match context_guidance_mode {self.context_guidance_mode!r}")


EntryCost = Callable[[PackItem, str, ContextFormat], int]


def entry_cost(item: PackItem, representation: str, fmt: ContextFormat) -> int:
    """Tokens of one entry line. The ref number is a single token in both formats, so the cost
    does not depend on the entry's position and ref 1 prices any position."""
    return count_tokens(render_entry(item, 1, representation, fmt))  # type: ignore[arg-type]


def pack(
    items: Sequence[PackItem],
    config: PackingConfig,
    *,
    reference_time: datetime,
    temporal_query: bool,
    cost: EntryCost = entry_cost,
) -> ContextBundle:
    """Pack returned results into a context of at most ``config.token_budget`` tokens.

    ``cost`` prices an entry line; the pipeline passes a cached equivalent of ``entry_cost``.
    """
    _check_inputs(items, reference_time)
    by_rank = sorted(items, key=lambda i: i.rank)
    fmt, budget = config.context_format, config.token_budget
    header = render_header(reference_time, fmt)
    guidance = guidance_text(config.context_guidance_mode, temporal_query=temporal_query, reference_time=reference_time)
    used = count_tokens(header) + (count_tokens(guidance) if guidance else 0)
    entries: list[ContextEntry] = []
    if used <= budget:
        ladder = _fidelity_ladder(config.min_fidelity)
        for item in _packing_order(by_rank, config, cost):
            entry = _fit(item, len(entries) + 1, ladder, fmt, budget - used, cost)
            if entry is not None:
                entries.append(entry)
                used += entry.token_cost
    packed = {e.node_id for e in entries}
    settings = dict(
        tokenizer=TOKENIZER_ID,
        context_format=fmt,
        context_guidance_mode=config.context_guidance_mode,
        multipath_ordering=config.multipath_ordering,
        min_fidelity=config.min_fidelity,
        token_budget=budget,
        reference_time=reference_time,
        excluded_ids=tuple(i.node_id for i in by_rank if i.node_id not in packed),
    )
    if not entries:
        return ContextBundle(**settings, header="", guidance=None, entries=(), tokens_used=0, budget_remaining=budget)
    # The bundle's validator recounts the rendered text, so line-by-line costs must add up.
    return ContextBundle(
        **settings,
        header=header,
        guidance=guidance,
        entries=tuple(entries),
        tokens_used=used,
        budget_remaining=budget - used,
    )


def _check_inputs(items: Sequence[PackItem], reference_time: datetime) -> None:
    if reference_time.tzinfo is None or reference_time.utcoffset() is None:
        raise InvalidInput("reference_time", "must be timezone-aware; attach a timezone such as UTC")
    seen: set[UUID] = set()
    for item in items:
        if item.node_id in seen:
            raise InvalidInput("items", f"node_id {item.node_id} appears more than once; pass each result once")
        seen.add(item.node_id)


def _fidelity_ladder(min_fidelity: Fidelity) -> tuple[str, ...]:
    return FIDELITY_ORDER[: FIDELITY_ORDER.index(min_fidelity) + 1]


def _fit(
    item: PackItem, ref: int, ladder: tuple[str, ...], fmt: ContextFormat, room: int, cost: EntryCost
) -> ContextEntry | None:
    """The richest representation of ``item`` that costs at most ``room`` tokens, if any."""
    for representation in ladder:
        tokens = cost(item, representation, fmt)
        if tokens <= room:
            return ContextEntry(
                node_id=item.node_id,
                ref=ref,
                rank=item.rank,
                representation=representation,
                text=render_entry(item, ref, representation, fmt),
                token_cost=tokens,
                has_content=representation in TEXT_REPRESENTATIONS,
            )
    return None


def _packing_order(by_rank: list[PackItem], config: PackingConfig, cost: EntryCost) -> list[PackItem]:
    """Priority tier first, then the rest; ``config.multipath_ordering`` orders within each tier."""
    tiers = (
        [i for i in by_rank if i.node_type in PRIORITY_NODE_TYPES],
        [i for i in by_rank if i.node_type not in PRIORITY_NODE_TYPES],
    )
    return [item for tier in tiers for item in _order_tier(tier, config, cost)]


def _order_tier(tier: list[PackItem], config: PackingConfig, entry_cost: EntryCost) -> list[PackItem]:
    if config.multipath_ordering == "score" or not tier:
        return tier
    cost = {i.node_id: entry_cost(i, "full", config.context_format) for i in tier}
    if config.multipath_ordering == "density":
        return sorted(tier, key=lambda i: (-i.score / cost[i.node_id], i.rank))
    if config.multipath_ordering == "balanced":
        return _balanced(tier, cost, config.token_budget)
    raise InvalidInput("multipath_ordering", f"unknown policy {config.multipath_ordering!r}")


def _balanced(tier: list[PackItem], cost: dict[UUID, int], budget: int) -> list[PackItem]:
    """Lead with the best-ranked item several channels agree on, then by length-discounted score.

    An entry whose full rendering would take a quarter of the budget or more loses a quarter of
    its score; shorter entries lose proportionally less, so one long memory cannot crowd out
    several nearly as relevant short ones.
    """
    lead = next((i for i in tier if len(i.paths) >= 2), tier[0])
    quarter = budget / 4

    def value(item: PackItem) -> float:
        return item.score * (1 - LONG_ENTRY_PENALTY * min(1.0, cost[item.node_id] / quarter))

    return [lead, *sorted((i for i in tier if i is not lead), key=lambda i: (-value(i), i.rank))]
