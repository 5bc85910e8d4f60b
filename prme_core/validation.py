"""Turn pydantic validation failures into ``InvalidInput`` errors that name the field."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from prme_core.errors import InvalidInput
from prme_core.types import Owner

M = TypeVar("M", bound=BaseModel)
_OWNER = TypeAdapter(Owner)


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
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if not isinstance(value, Mapping):
        raise InvalidInput(field, f"expected a {model.__name__} or a mapping, got {type(value).__name__}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        raise InvalidInput(*describe(exc, field)) from None


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
    from prme_core.memory.models import is_scope_name

    if isinstance(scopes, str):
        scopes = (scopes,)
    if not isinstance(scopes, (list, tuple, set, frozenset)) or not scopes:
        raise InvalidInput(field, "must be a non-empty list of scope names (an exact scope set)")
    for scope in scopes:
        if not is_scope_name(scope):
            raise InvalidInput(field, f"{scope!r} is not a scope name (a lowercase identifier)")
        if allowed is not None and scope not in allowed:
            raise InvalidInput(field, f"unknown scope {scope!r}; configured scopes: {list(allowed)}")
    return tuple(sorted(set(scopes)))


def check_limit(limit: Any, *, field: str = "limit", maximum: int = 1000) -> int:
    """A page size: an int (not a bool) in 1..maximum."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInput(field, f"must be an integer in 1..{maximum}, got {limit!r}")
    if not 1 <= limit <= maximum:
        raise InvalidInput(field, f"must be in 1..{maximum}, got {limit}")
    return limit
