"""The canonical JSON form: golden bytes, rejection of what has no canonical form."""

from datetime import datetime, timedelta, timezone
from uuid import UUID

import pytest

from prme_core.canonical import EMPTY_SHA256, canonical_digest, canonical_json, sha256_hex
from prme_core.errors import CanonicalFormError

GOLDEN_DOC = {
    "z": [1, 2.5, 0.1, 1.0, 1e-11, 1e16, -0.0],
    "a": {"café": "naïve ☕", "b": None, "t": True},
    "id": UUID("12345678-1234-5678-1234-567812345678"),
    "when": datetime(2023, 5, 8, 15, 56, tzinfo=timezone(timedelta(hours=2))),
}
GOLDEN_BYTES = (
    '{"a":{"b":null,"café":"naïve ☕","t":true},"id":"12345678-1234-5678-1234-567812345678",'
    '"when":"2023-05-08T13:56:00Z","z":[1,2.5,0.1,1.0,1e-11,1e+16,-0.0]}'
).encode()


def test_canonical_bytes_match_the_golden_form():
    assert canonical_json(GOLDEN_DOC) == GOLDEN_BYTES
    assert canonical_digest(GOLDEN_DOC) == sha256_hex(GOLDEN_BYTES)


def test_key_order_of_the_input_does_not_change_the_bytes():
    assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1}) == b'{"a":2,"b":1}'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_are_rejected_not_written_as_null(bad):
    with pytest.raises(CanonicalFormError, match=r"\$\.x\[1\]"):
        canonical_json({"x": [None, bad]})


def test_naive_datetimes_are_rejected():
    with pytest.raises(CanonicalFormError, match="naive"):
        canonical_json({"t": datetime(2024, 1, 1)})


def test_unsupported_types_are_rejected():
    with pytest.raises(CanonicalFormError):
        canonical_json({"s": {1, 2}})


def test_empty_digest_is_the_sha256_of_nothing():
    assert sha256_hex(b"") == EMPTY_SHA256 == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
