"""Strict request bodies and an even key check (issue 29, HTTP probe findings), against a real
server on both backends.

A body is one JSON text in UTF-8 (RFC 8259) whose values have the JSON types the schema names:
no "0.5" for a number, no 1 for a boolean, no Unix time for a timestamp, no key twice in an
object, no other encoding; anything else is a 422 naming the field (or the body and the
position) and writes nothing. An unknown key id is checked exactly as a known one with a wrong
secret is, and answered with the same body.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from prme_api.http import MAX_BODY_DEPTH
from prme_core.access import keys
from tests.api.conftest import ApiServer

pytestmark = pytest.mark.server

OWNER = "strict-prober"


@dataclass
class Prober:
    api: ApiServer
    key: str

    def post(self, path: str, body: Any) -> Any:
        """POST ``body``: a value is sent as JSON, bytes and text exactly as given."""
        content = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body)
        with self.api.http(self.key) as http:
            return http.post(path, content=content, headers={"content-type": "application/json"})


@pytest.fixture(scope="module")
def prober(api: ApiServer) -> Prober:
    return Prober(api, api.client.create_api_key(OWNER, role="operator").api_key)


def _refused(prober: Prober, path: str, body: Any, kind: str) -> dict[str, Any]:
    """POST a body that must be refused with 422 of ``kind``, writing nothing; the error."""
    before = prober.api.rows()
    response = prober.post(path, body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == kind, error
    assert error["message"].startswith(f"{error['field']}: "), error
    assert prober.api.rows() == before
    return error


# --- 1. JSON types are not converted --------------------------------------------------------------

PROFILE = str(uuid.uuid4())
WRONG_TYPES = [
    # (what, path, body, field)
    ("number as a string", "/v1/memories", {"content": "x", "salience": "0.5"}, "salience"),
    ("number as a boolean", "/v1/memories", {"content": "x", "confidence": True}, "confidence"),
    ("integer as a string", "/v1/retrieve", {"query": "cat", "limit": "5"}, "limit"),
    ("integer as a float", "/v1/retrieve", {"query": "cat", "limit": 5.0}, "limit"),
    ("boolean as a string", "/v1/retrieve", {"query": "cat", "include_context": "true"}, "include_context"),
    ("boolean as a number", "/v1/retrieve", {"query": "cat", "include_bundle": 0}, "include_bundle"),
    ("string as a number", "/v1/memories", {"content": "x", "session_id": 7}, "session_id"),
    (
        "nested number as a string",
        "/v1/retrieve",
        {"query": "cat", "ranking_multipliers": {"lexical": "1.0"}},
        "ranking_multipliers.lexical",
    ),
    (
        "label as a number",
        "/v1/relevance",
        {"request_id": str(uuid.uuid4()), "labels": {str(uuid.uuid4()): 1}},
        "labels.",
    ),
    ("flag in a path route's body", f"/v1/profiles/{PROFILE}/activate", {"reactivate": "false"}, "reactivate"),
]


@pytest.mark.parametrize("what, path, body, field", WRONG_TYPES, ids=[w[0] for w in WRONG_TYPES])
def test_a_value_of_another_json_type_is_422_naming_the_field_and_writes_nothing(prober, what, path, body, field):
    error = _refused(prober, path, body, "invalid_input")
    assert error["field"].startswith(field), error
    assert "got the" in error["message"] and "not converted" in error["message"], error


TIMESTAMPS = [
    # (what, path, body, field)
    ("Unix seconds", "/v1/memories", {"content": "x", "event_time": 1_700_000_000}, "event_time"),
    ("fractional Unix seconds", "/v1/memories", {"content": "x", "valid_from": 1_700_000_000.5}, "valid_from"),
    ("Unix seconds as a string", "/v1/memories", {"content": "x", "event_time": "1700000000"}, "event_time"),
    ("negative Unix time as a string", "/v1/memories", {"content": "x", "event_time": "-1"}, "event_time"),
    (
        "reference time in Unix seconds",
        "/v1/retrieve",
        {"query": "cat", "reference_time": 1_700_000_000},
        "reference_time",
    ),
    ("key expiry in Unix seconds", "/v1/keys", {"expires_at": 4_000_000_000}, "expires_at"),
    ("key expiry as a numeric string", "/v1/keys", {"expires_at": "4000000000"}, "expires_at"),
]


@pytest.mark.parametrize("what, path, body, field", TIMESTAMPS, ids=[t[0] for t in TIMESTAMPS])
def test_a_timestamp_that_is_not_an_iso_8601_string_is_422_naming_the_field(prober, what, path, body, field):
    error = _refused(prober, path, body, "invalid_input")
    assert error["field"] == field and "ISO 8601" in error["message"], error


def test_values_json_writes_as_strings_still_parse_and_an_integer_is_a_number(prober):
    node_id = str(uuid.uuid4())
    body = {
        "id": node_id,
        "content": "The strict prober's kettle descales monthly",
        "node_type": "fact",
        "event_time": "2026-11-03T11:30:00+02:00",
        "salience": 1,
        "metadata": {"count": 3, "ratio": 0.5, "flag": True, "label": "1700000000"},
    }
    stored = prober.post("/v1/memories", body)
    assert stored.status_code == 200, stored.text
    node = stored.json()
    assert (node["id"], node["node_type"], node["event_time"]) == (node_id, "fact", "2026-11-03T09:30:00Z")
    assert node["salience"] == 1.0 and node["metadata"]["label"] == "1700000000"  # free-form text stays text
    retrieved = prober.post(
        "/v1/retrieve",
        {"query": "kettle", "limit": 5, "reference_time": "2026-12-07T09:00:00Z", "include_bundle": True},
    )
    assert retrieved.status_code == 200, retrieved.text
    assert [r["node_id"] for r in retrieved.json()["results"]] == [node_id]


# --- 3. a key twice in one object -------------------------------------------------------------------

REPEATED_KEYS = [
    # (what, path, body, field, key)
    ("at the top", "/v1/memories", '{"content": "a", "content": "b"}', "content", "content"),
    ("with the same value", "/v1/memories", '{"content": "a", "content": "a"}', "content", "content"),
    (
        "in a batch item",
        "/v1/memories/batch",
        '{"items": [{"content": "a"}, {"content": "b", "scope": "personal", "scope": "project"}]}',
        "items.1.scope",
        "scope",
    ),
    (
        "deep in free-form metadata",
        "/v1/memories",
        '{"content": "a", "metadata": {"a": [{"b": 1, "b": 2}]}}',
        "metadata.a.0.b",
        "b",
    ),
]


@pytest.mark.parametrize("what, path, body, field, key", REPEATED_KEYS, ids=[r[0] for r in REPEATED_KEYS])
def test_a_key_repeated_in_one_object_is_422_naming_it_at_any_depth(prober, what, path, body, field, key):
    error = _refused(prober, path, body, "invalid_json")
    assert error["field"] == field and f"key {key!r} appears more than once" in error["message"], error


# --- 4. UTF-8 only --------------------------------------------------------------------------------

TEXT = '{"content": "caf\u00e9 notes"}'
ENCODINGS = [
    ("UTF-16 with a byte order mark", TEXT.encode("utf-16")),
    ("UTF-16LE", TEXT.encode("utf-16-le")),
    ("UTF-16BE", TEXT.encode("utf-16-be")),
    ("UTF-32", TEXT.encode("utf-32")),
    ("UTF-8 with a byte order mark", TEXT.encode("utf-8-sig")),
    ("Latin-1", TEXT.encode("latin-1")),
    ("an overlong UTF-8 sequence", b'{"content": "\xc0\xaf"}'),
    ("a stray continuation byte", b'{"content": "\x80"}'),
]


@pytest.mark.parametrize("what, body", ENCODINGS, ids=[e[0] for e in ENCODINGS])
def test_a_body_that_is_not_utf_8_is_422_saying_utf_8_is_required(prober, what, body):
    error = _refused(prober, "/v1/memories", body, "invalid_json")
    assert error["field"] == "body" and "UTF-8" in error["message"], error


def test_the_same_text_in_utf_8_is_stored(prober):
    response = prober.post("/v1/memories", TEXT.encode("utf-8"))
    assert response.status_code == 200 and response.json()["content"] == "caf\u00e9 notes", response.text


# --- 5. malformed JSON is a 422 with the app's error shape -----------------------------------------

MALFORMED = [
    # (what, body, words the message holds)
    ("truncated", '{"content": "x"', "line 1 column"),
    ("cut inside a value", '{"content": ', "line 1 column"),
    ("trailing garbage", '{"content": "x"} and more', "Extra data at line 1 column 18"),
    ("two values", '{"content": "x"}{"content": "y"}', "Extra data"),
    ("an invalid escape", '{"content": "\\x41"}', "Invalid \\escape"),
    ("a raw control character", '{"content": "a\tb"}', "Invalid control character"),
    ("single quotes", "{'content': 'x'}", "line 1 column 2"),
    ("a second line", '{"content": "x",\n "scope": }', "line 2 column"),
]


@pytest.mark.parametrize("what, body, words", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_json_is_422_naming_what_and_where(prober, what, body, words):
    error = _refused(prober, "/v1/memories", body, "invalid_json")
    assert error["field"] == "body" and "not valid JSON" in error["message"] and words in error["message"], error


def test_a_lone_surrogate_escape_is_422_naming_the_field(prober):
    error = _refused(prober, "/v1/memories", '{"content": "a\\udc00b"}', "invalid_json")
    assert error["field"] == "content" and "surrogate" in error["message"], error


@pytest.mark.parametrize("depth", [MAX_BODY_DEPTH + 1, 1_000, 100_000])
def test_a_body_nested_past_the_bound_is_422_naming_the_bound_at_any_depth(prober, depth):
    error = _refused(prober, "/v1/memories", "[" * depth + "]" * depth, "invalid_json")
    assert error["field"] == "body" and error["bound"] == {"max_depth": MAX_BODY_DEPTH}, error


def test_a_body_at_the_bound_parses_and_is_judged_by_the_model(prober):
    error = _refused(prober, "/v1/memories", "[" * MAX_BODY_DEPTH + "]" * MAX_BODY_DEPTH, "invalid_input")
    assert error["field"] == "body", error  # a list is no memory


def test_body_errors_come_before_the_key_only_for_unreadable_json(api):
    with api.http("prme_" + "0" * 24 + "_" + "A" * 43) as http:
        malformed = http.post("/v1/memories", content=b'{"content": ', headers={"content-type": "application/json"})
        wrong_type = http.post("/v1/memories", json={"content": "x", "salience": "0.5"})
    assert malformed.status_code == 422 and malformed.json()["error"]["type"] == "invalid_json"
    assert wrong_type.status_code == 401  # what a body means is only judged for a known key


# --- 6. an unknown key id costs what a known one does -------------------------------------------------


def _spy(calls: Counter[str], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def spy(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return function(*args, **kwargs)

    return spy


def test_an_unknown_key_id_is_checked_like_a_known_one_and_answered_alike(api, prober, monkeypatch):
    calls: Counter[str] = Counter()
    monkeypatch.setattr(keys, "_digest", _spy(calls, "digest", keys._digest))
    monkeypatch.setattr(keys, "_parse", _spy(calls, "parse", keys._parse))
    monkeypatch.setattr(keys.hmac, "compare_digest", _spy(calls, "compare_digest", keys.hmac.compare_digest))
    known_id = prober.key.split("_")[1]
    wrong_secret = secrets.token_urlsafe(keys.SECRET_BYTES)
    answers, counts = [], []
    for key_id in (known_id, secrets.token_hex(keys.KEY_ID_HEX // 2)):
        calls.clear()
        with api.http(f"prme_{key_id}_{wrong_secret}") as http:
            answers.append(http.get("/v1/whoami"))
        counts.append(dict(calls))
    assert counts[0] == counts[1] == {"digest": 1, "parse": 1, "compare_digest": 1}, counts
    known, unknown = answers
    assert known.status_code == unknown.status_code == 401
    assert known.content == unknown.content and known.headers["WWW-Authenticate"] == unknown.headers["WWW-Authenticate"]
    assert known.json()["error"]["reason"] == "unknown"
