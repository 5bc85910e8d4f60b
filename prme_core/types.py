"""Shared field types and the frozen base model for everything that crosses a boundary."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    model_serializer,
)

from prme_core.canonical import SHA256_HEX_PATTERN, canonical_json, sha256_hex

MAX_OWNER_CHARS = 256
MAX_LABEL_CHARS = 512
# Unicode control characters (category Cc: C0, DEL and C1, e.g. U+0085) and the line and
# paragraph separators U+2028/U+2029, which some tools also treat as line breaks.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
NUL_MESSAGE = "must not contain NUL characters (\\x00): PostgreSQL text cannot store them; remove or replace them"


def _to_utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _check_owner(value: str) -> str:
    if not value.strip():
        raise ValueError("owner must not be blank")
    if value != value.strip():
        raise ValueError("owner must not start or end with whitespace")
    if _CONTROL.search(value):
        raise ValueError(
            "owner must not contain control characters (Unicode Cc such as U+0085) or the line and "
            "paragraph separators U+2028/U+2029"
        )
    return value


def _reject_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError(NUL_MESSAGE)
    return value


def nul_location(value: Any, path: str = "") -> str | None:
    """Where the first NUL character sits in a string or a JSON-like value (its keys and strings):
    ``path`` extended by ``['key']`` and ``[index]`` steps, or None when there is none. Walks with
    an explicit stack (depth-first, in order), so no nesting depth can exhaust Python's stack."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return where
        elif isinstance(item, Mapping):
            children: list[tuple[Any, str]] = []
            for key, child in item.items():
                if isinstance(key, str) and "\x00" in key:  # found after the children before it
                    children.append(("\x00", f"{where} key {key!r}"))
                    break
                children.append((child, f"{where}[{key!r}]"))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


H = TypeVar("H", bound=Hashable)


def sorted_unique(values: Iterable[H]) -> tuple[H, ...]:
    """``values`` in canonical set form: sorted, each once (how scope sets are recorded)."""
    return tuple(sorted(set(values)))  # type: ignore[type-var]


def _named(info: ValidationInfo, rule: str) -> str:
    return f"{info.field_name} {rule}" if info.field_name else rule


def _reject_blank(value: str, info: ValidationInfo) -> str:
    if not value.strip():
        raise ValueError(_named(info, "must not be blank"))
    return value


def _reject_repeats(value: tuple[Any, ...], info: ValidationInfo) -> tuple[Any, ...]:
    if len(set(value)) != len(value):
        raise ValueError(_named(info, "must be unique"))
    return value


def _require_sorted_unique(value: tuple[Any, ...], info: ValidationInfo) -> tuple[Any, ...]:
    if sorted_unique(value) != value:
        raise ValueError(_named(info, "must be sorted and unique"))
    return value


def check_window_end(value: Any, info: ValidationInfo) -> Any:
    """Field validator of a window's upper bound (``time_to``, ``event_time_to``): not earlier
    than its lower bound (``time_from``, ``event_time_from``), which is declared first."""
    low = info.field_name[: -len("_to")] + "_from"  # type: ignore[index]
    start = info.data.get(low)
    if value is not None and start is not None and start > value:
        raise ValueError(f"must not be earlier than {low} ({start.isoformat()}); swap the two bounds")
    return value


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_to_utc)]
"""A timezone-aware datetime, normalized to UTC (naive values are rejected)."""

Owner = Annotated[str, StringConstraints(min_length=1, max_length=MAX_OWNER_CHARS), AfterValidator(_check_owner)]
"""A non-blank owner identity of at most 256 characters, without control characters."""

NulFree = AfterValidator(_reject_nul)
"""Marks caller text that is stored: both backends refuse NUL, which PostgreSQL text cannot hold."""

Sha256Hex = Annotated[str, StringConstraints(pattern=f"^{SHA256_HEX_PATTERN}$")]
"""A lowercase hexadecimal SHA-256 digest."""

Unit = Annotated[float, Field(ge=0.0, le=1.0)]
"""A number in [0, 1]: a weight, a share or a metric value."""

NonBlank = AfterValidator(_reject_blank)
"""Marks text that must hold more than whitespace (the message names the field)."""

Label = Annotated[str, StringConstraints(min_length=1, max_length=MAX_LABEL_CHARS), NulFree, NonBlank]
"""A stored caller-chosen name (answer id, query group): 1..512 characters, not blank, no NUL."""

Unique = AfterValidator(_reject_repeats)
"""Marks a tuple whose items must not repeat (its order is kept)."""

SortedUnique = AfterValidator(_require_sorted_unique)
"""Marks a tuple recorded in canonical set form (``sorted_unique``): sorted, no repeats."""

Normalized = AfterValidator(sorted_unique)
"""Puts a caller's tuple into canonical set form (``sorted_unique``): repeats dropped, sorted."""

WindowEnd = Annotated[UtcDatetime | None, AfterValidator(check_window_end)]
"""The upper bound of an optional time window (``time_to``, ``event_time_to``), not earlier than
its lower bound (``check_window_end``)."""


class FrozenModel(BaseModel):
    """Immutable, strict model: unknown fields and non-finite floats are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, validate_default=True)

    def canonical_dict(self) -> dict[str, Any]:
        """The JSON-mode dict this model's canonical bytes are made from."""
        return self.model_dump(mode="json")

    def canonical_bytes(self) -> bytes:
        # Float fields were validated finite; free-form maps are checked by their own models.
        return canonical_json(self.canonical_dict(), finite=True)

    def checksum(self) -> str:
        return sha256_hex(self.canonical_bytes())


class EvolvingModel(FrozenModel):
    """A persisted model that gained fields after records of it were stored. Each such field
    (``ADDED_FIELDS``) defaults to None and is left out of the serialized form while None, so a
    record written before the field existed keeps its canonical bytes and checksum."""

    ADDED_FIELDS: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_absent_added_fields(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in self.ADDED_FIELDS:
                if name in data and data[name] is None:
                    del data[name]
        return data


def utc_now() -> datetime:
    """The server clock, timezone-aware UTC, truncated to microseconds."""
    return datetime.now(UTC)


def to_epoch_us(value: datetime | None) -> int | None:
    """Microseconds since the Unix epoch of an aware datetime (None stays None)."""
    if value is None:
        return None
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_epoch_us(value: int | None) -> datetime | None:
    """The aware UTC datetime of an epoch-microsecond integer (None stays None)."""
    if value is None:
        return None
    return _EPOCH + timedelta(microseconds=int(value))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


SCOPE_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
"""A scope name: a lowercase identifier (a-z, then up to 63 of a-z, 0-9, _ and -)."""
_SCOPE_RE = re.compile(SCOPE_NAME_PATTERN)


def is_scope_name(value: object) -> bool:
    """True for a whole-string scope name (``fullmatch``: ``$`` alone would accept a trailing newline)."""
    return isinstance(value, str) and _SCOPE_RE.fullmatch(value) is not None
