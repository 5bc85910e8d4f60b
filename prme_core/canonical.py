"""The one canonical JSON form and the SHA-256 digests that every PRME checksum uses.

Canonical form (version ``prme-canonical-json-v1``):

* UTF-8 bytes, no byte-order mark, no insignificant whitespace;
* object keys sorted (orjson ``OPT_SORT_KEYS``), non-string keys rejected;
* strings emitted as raw UTF-8 (only the escapes JSON requires);
* integers in decimal (64-bit range); floats in shortest round-trip form (``0.1``, ``1.0``,
  ``1e-11``, ``1e+16``); NaN and infinities are rejected, never written as ``null``;
* UUIDs as lowercase hyphenated strings; timezone-aware datetimes as ISO-8601 in UTC with a
  ``Z`` suffix; naive datetimes are rejected.

The encoder is orjson (C/Rust). orjson writes a non-finite float as ``null``, so the encoded
bytes are scanned for ``null`` and, only if one occurs, the document is walked to tell a real
null from a NaN. Callers encoding a validated model (whose floats were checked finite on the way
in) pass ``finite=True`` to skip that scan.
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import UTC, datetime
from typing import Any

import orjson

from prme_core.errors import CanonicalFormError

CANONICAL_FORM = "prme-canonical-json-v1"
SHA256_HEX_PATTERN = "[0-9a-f]{64}"
"""A lowercase hexadecimal SHA-256 digest, the form of every PRME checksum."""
_SHA256_HEX = re.compile(SHA256_HEX_PATTERN)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return utc_isoformat(value)
    raise TypeError(f"{type(value).__name__} has no canonical JSON form")


def utc_isoformat(value: datetime) -> str:
    """ISO-8601 text of an aware datetime, converted to UTC, with a ``Z`` suffix."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise CanonicalFormError("naive datetimes have no canonical form; attach a timezone")
    text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def canonical_json(obj: Any, *, finite: bool = False) -> bytes:
    """Encode ``obj`` in the canonical form; raise ``CanonicalFormError`` if it has none.

    ``finite=True`` promises every float in ``obj`` is finite (a validated model's dump).
    """
    try:
        out = orjson.dumps(obj, default=_default, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        if isinstance(exc.__cause__, CanonicalFormError):
            raise exc.__cause__ from None
        raise CanonicalFormError(f"value cannot be encoded as canonical JSON: {exc}") from exc
    if not finite and b"null" in out:
        _assert_finite(obj, "$")
    return out


def assert_finite(obj: Any, where: str = "$") -> None:
    """Raise ``CanonicalFormError`` if any float inside ``obj`` is NaN or infinite."""
    _assert_finite(obj, where)


def _assert_finite(obj: Any, path: str) -> None:
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise CanonicalFormError(f"{path} is {obj!r}; canonical JSON has no NaN or infinity")
    elif isinstance(obj, dict):
        for key, value in obj.items():
            _assert_finite(value, f"{path}.{key}")
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            _assert_finite(value, f"{path}[{index}]")


def parse_json(data: bytes | str) -> Any:
    """Parse JSON text (canonical or not) into Python values."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CanonicalFormError(f"stored JSON does not parse: {exc}") from exc


def sha256_hex(data: bytes | str) -> str:
    """Lowercase hex SHA-256 of bytes, or of a string's UTF-8 encoding."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def canonical_digest(obj: Any) -> str:
    """SHA-256 hex of the canonical JSON of ``obj``."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()


def is_sha256_hex(value: object) -> bool:
    """True for a 64-character lowercase hexadecimal string (``SHA256_HEX_PATTERN``)."""
    return isinstance(value, str) and _SHA256_HEX.fullmatch(value) is not None
