"""One memory becomes one line of context text; plus the header and guidance lines.

Every line is single-line by construction (the bundle joins lines with ``\\n``) and content is
rendered whole, never truncated: a memory that does not fit is shown at a lower fidelity or
left out by the packer, never cut.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from prme_core.canonical import canonical_json, utc_isoformat
from prme_core.errors import InvalidInput
from prme_core.retrieval.config import ContextFormat, GuidanceMode
from prme_core.types import FrozenModel, UtcDatetime

Representation = Literal["full", "prose", "reference"]
TEXT_REPRESENTATIONS: tuple[str, ...] = ("full", "prose")
"""Representations that carry the memory's content; ``reference`` carries only its id."""

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SEP = " · "


class PackItem(FrozenModel):
    """One returned retrieval result, as the packer needs it."""

    node_id: UUID
    rank: int = Field(ge=0)
    score: float
    node_type: str
    scope: str
    content: str
    event_time: UtcDatetime | None = None
    created_at: UtcDatetime
    valid_from: UtcDatetime | None = None
    valid_to: UtcDatetime | None = None
    epistemic_type: str
    session_id: str | None = None
    paths: tuple[str, ...] = ()


def render_entry(item: PackItem, ref: int, representation: Representation, fmt: ContextFormat) -> str:
    """The single context line for ``item`` shown as ``[ref]`` at ``representation`` in ``fmt``."""
    if fmt == "auditable":
        return canonical_json(_auditable_fields(item, ref, representation)).decode()
    if fmt == "compact":
        return _one_line(_compact_line(item, ref, representation))
    raise InvalidInput("context_format", f"unknown format {fmt!r}; use 'auditable' or 'compact'")


def render_header(reference_time: datetime, fmt: ContextFormat) -> str:
    """The first line of a non-empty context; it does not depend on how many entries follow."""
    when = utc_isoformat(reference_time)
    if fmt == "auditable":
        return canonical_json({"context": "prme", "format": "auditable", "reference_time": when}).decode()
    if fmt == "compact":
        return f"PRME context{_SEP}reference time {when}"
    raise InvalidInput("context_format", f"unknown format {fmt!r}; use 'auditable' or 'compact'")


def guidance_text(mode: GuidanceMode, *, temporal_query: bool, reference_time: datetime) -> str | None:
    """The one-line reading instruction for ``mode``, or None when the mode asks for none."""
    temporal = (
        f"Entries are dated and the reference time is {utc_isoformat(reference_time)}; read relative "
        "dates against it, and when entries disagree about the present, trust the most recent one."
    )
    if mode == "off":
        return None
    if mode == "temporal":
        return temporal if temporal_query else None
    if mode == "all":
        return f"{temporal} Treat hypothetical or unverified entries with care; observed entries are first-hand."
    raise InvalidInput("context_guidance_mode", f"unknown mode {mode!r}; use 'off', 'temporal' or 'all'")


def _auditable_fields(item: PackItem, ref: int, representation: Representation) -> dict[str, Any]:
    if representation == "prose":
        return {"ref": ref, "id": item.node_id, "content": item.content}
    if representation == "reference":
        return {
            "ref": ref,
            "id": item.node_id,
            "type": item.node_type,
            "reference_only": True,
            **_present(time=item.event_time),
        }
    if representation == "full":
        return {
            "ref": ref,
            "id": item.node_id,
            "type": item.node_type,
            "scope": item.scope,
            "recorded": item.created_at,
            "epistemic": item.epistemic_type,
            "content": item.content,
            **_present(
                time=item.event_time, valid_from=item.valid_from, valid_to=item.valid_to, session=item.session_id
            ),
        }
    raise _unknown_representation(representation)


def _compact_line(item: PackItem, ref: int, representation: Representation) -> str:
    day = (item.event_time or item.created_at).date().isoformat()
    if representation == "prose":
        return f"[{ref}] {item.content}"
    if representation == "reference":
        return f"[{ref}] " + _SEP.join((item.node_type, day, "reference only", str(item.node_id)))
    if representation == "full":
        return f"[{ref}] " + _SEP.join((item.node_type, day, item.epistemic_type, item.content))
    raise _unknown_representation(representation)


def _present(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _one_line(text: str) -> str:
    return _LINE_BREAK.sub(" / ", text)


def _unknown_representation(representation: str) -> InvalidInput:
    return InvalidInput(
        "representation", f"unknown representation {representation!r}; use 'full', 'prose' or 'reference'"
    )
