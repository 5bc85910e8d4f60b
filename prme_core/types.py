"""Shared field types and the frozen base model for everything that crosses a boundary."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, StringConstraints

from prme_core.canonical import canonical_json, sha256_hex

MAX_OWNER_CHARS = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _to_utc(value: datetime) -> datetime:
    return value.astimezone(timezone.utc)


def _check_owner(value: str) -> str:
    if not value.strip():
        raise ValueError("owner must not be blank")
    if value != value.strip():
        raise ValueError("owner must not start or end with whitespace")
    if _CONTROL.search(value):
        raise ValueError("owner must not contain control characters")
    return value


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_to_utc)]
"""A timezone-aware datetime, normalized to UTC (naive values are rejected)."""

Owner = Annotated[str, StringConstraints(min_length=1, max_length=MAX_OWNER_CHARS), AfterValidator(_check_owner)]
"""A non-blank owner identity of at most 256 characters, without control characters."""

Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""A lowercase hexadecimal SHA-256 digest."""


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


def utc_now() -> datetime:
    """The server clock, timezone-aware UTC, truncated to microseconds."""
    return datetime.now(timezone.utc)


def to_epoch_us(value: datetime | None) -> int | None:
    """Microseconds since the Unix epoch of an aware datetime (None stays None)."""
    if value is None:
        return None
    delta = value.astimezone(timezone.utc) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_epoch_us(value: int | None) -> datetime | None:
    """The aware UTC datetime of an epoch-microsecond integer (None stays None)."""
    if value is None:
        return None
    return _EPOCH + timedelta(microseconds=int(value))


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
