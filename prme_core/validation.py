"""Turn pydantic validation failures into ``InvalidInput`` errors that name the field."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, TypeAdapter, ValidationError

from prme_core.canonical import is_sha256_hex
from prme_core.errors import InvalidInput
from prme_core.types import MAX_LABEL_CHARS, NUL_MESSAGE, Owner, is_scope_name, nul_location, sorted_unique

M = TypeVar("M", bound=BaseModel)
_OWNER = TypeAdapter(Owner)

MAX_NESTING_DEPTH = 64
"""How deep caller JSON-like values (memory and edge metadata above all) may nest: objects and
lists inside one another, the value itself counting as level 1. Everything stored must read back
over HTTP and MCP, whose JSON encoder stops at 255 levels including the response's own wrapping
(a node's metadata failed to read at 254), so the bound stays far below that."""


def describe(exc: ValidationError, prefix: str = "") -> tuple[str, str]:
    """The (field path, message) of a validation error's first problem, plus a count of the rest."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or "input")
    message = first.get("msg", "invalid value")
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    more = len(errors) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return field, message


def parse_model(model: type[M], value: Any, field: str) -> M:
    """Validate ``value`` (a model, mapping or keyword dict) as ``model``; raise ``InvalidInput``."""
    if isinstance(value, model):
        _check_field_nesting({name: getattr(value, name) for name in type(value).model_fields}, field)
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if not isinstance(value, Mapping):
        raise InvalidInput(field, f"expected a {model.__name__} or a mapping, got {type(value).__name__}")
    _check_field_nesting(value, field)
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        raise InvalidInput(*describe(exc, field)) from None


def check_nesting(value: Any, field: str, *, maximum: int = MAX_NESTING_DEPTH) -> Any:
    """Refuse a JSON-like value whose objects and lists nest more than ``maximum`` levels deep.

    The walk keeps an explicit stack, so any depth is answered with ``InvalidInput``, never with a
    ``RecursionError``; it stops at the first container beyond the bound.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > maximum:
            raise InvalidInput(
                field,
                f"nests objects and lists deeper than the bound of {maximum} levels; "
                "flatten it, or store the deeper part as a JSON string",
            )
        stack.extend((child, depth + 1) for child in children)
    return value


def _check_field_nesting(values: Mapping[Any, Any], field: str) -> None:
    """Apply ``check_nesting`` to every field value of a model's input, naming the field."""
    for key, item in values.items():
        check_nesting(item, f"{field}.{key}" if field else str(key))


def check_owner(owner: Any) -> str:
    """Validate an owner identity (non-blank, ≤ 256 characters, no control characters)."""
    if not isinstance(owner, str):
        raise InvalidInput("owner", f"must be a string, got {type(owner).__name__}")
    try:
        return _OWNER.validate_python(owner)
    except ValidationError as exc:
        raise InvalidInput("owner", describe(exc)[1]) from None


def check_scope_set(scopes: Any, *, allowed: Sequence[str] | None = None, field: str = "scopes") -> tuple[str, ...]:
    """An exact scope set: a non-empty collection of scope names, returned sorted and unique.

    ``allowed`` (an engine's configured scopes) additionally rejects names it does not list.
    """
    if isinstance(scopes, str):
        scopes = (scopes,)
    if not isinstance(scopes, (list, tuple, set, frozenset)) or not scopes:
        choose = "" if allowed is None else f" from {list(allowed)}"
        raise InvalidInput(field, f"must be a non-empty list of scope names{choose} (an exact scope set)")
    for scope in scopes:
        if not is_scope_name(scope):
            raise InvalidInput(
                field,
                f"{scope!r} is not a scope name (a lowercase identifier: a-z, then up to 63 of a-z, 0-9, _ and -)",
            )
        if allowed is not None and scope not in allowed:
            raise InvalidInput(field, f"unknown scope {scope!r}; configured scopes: {list(allowed)}")
    return sorted_unique(scopes)


def check_limit(limit: Any, *, field: str = "limit", maximum: int = 1000) -> int:
    """A page size: an int (not a bool) in 1..maximum."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInput(field, f"must be an integer in 1..{maximum}, got {limit!r}")
    if not 1 <= limit <= maximum:
        raise InvalidInput(field, f"must be in 1..{maximum}, got {limit}")
    return limit


def check_flag(value: Any, field: str) -> bool:
    """A flag: exactly True or False (no truthy strings or numbers)."""
    if not isinstance(value, bool):
        raise InvalidInput(field, f"must be True or False, got {value!r}")
    return value


def check_no_nul(value: Any, field: str) -> Any:
    """Refuse a NUL character anywhere in caller text bound for storage (keys and strings of
    JSON-like values included); both backends apply the same rule. Values nested deeper than
    ``MAX_NESTING_DEPTH`` are refused first, so the walk for NUL characters stays shallow."""
    check_nesting(value, field)
    where = nul_location(value)
    if where is not None:
        raise InvalidInput(field, f"{field}{where} {NUL_MESSAGE}" if where else NUL_MESSAGE)
    return value


def check_sha256(value: Any, field: str) -> str:
    """A lowercase hexadecimal SHA-256 digest."""
    if not is_sha256_hex(value):
        raise InvalidInput(field, f"must be a SHA-256 hex digest (64 lowercase hex characters), got {value!r}")
    return value


def check_label(value: Any, field: str, message: str) -> str:
    """A caller-chosen name: a non-blank string of at most 512 characters (``types.Label``'s
    bounds); ``message`` says what the name is for."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_LABEL_CHARS:
        raise InvalidInput(field, message)
    return value


def check_query_groups(query_groups: Any, field: str = "query_groups") -> dict[str, str]:
    """Caller query groups: request id → a non-blank group name of at most 512 characters."""
    if query_groups is None:
        return {}
    if not isinstance(query_groups, Mapping):
        raise InvalidInput(field, "must map request ids to group names")
    out: dict[str, str] = {}
    for key, name in query_groups.items():
        try:
            request = str(UUID(str(key)))
        except ValueError:
            raise InvalidInput(field, f"key {key!r} is not a request id") from None
        check_label(name, field, f"group name for {request} must be a non-blank string of at most 512 characters")
        check_no_nul(name, f"{field}[{request}]")
        out[request] = name
    return out


def check_aware(value: Any, field: str) -> datetime:
    """A timezone-aware datetime (naive ones and other types are refused, naming the field)."""
    if not isinstance(value, datetime):
        raise InvalidInput(field, f"must be a timezone-aware datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, "must be timezone-aware (naive datetimes are rejected)")
    return value
