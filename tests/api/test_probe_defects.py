"""Defects adversarial probes found in the API surfaces (issue 29).

Metadata nesting is a checked bound (``prme_core.validation.MAX_NESTING_DEPTH``): everything
accepted reads back over HTTP, anything deeper, however deep, is one typed ``InvalidInput``
naming the field and the bound, and nothing is written. ``prme mcp`` over stdio answers a line it
cannot parse with a JSON-RPC parse error and serves the next lines.
"""

from __future__ import annotations

import json
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prme_core.engine import MemoryClient
from prme_core.errors import InvalidInput
from prme_core.validation import MAX_NESTING_DEPTH
from tests.api.conftest import ApiServer

pytestmark = pytest.mark.server

PRME = shutil.which("prme", path=str(Path(sys.executable).parent)) or "prme"


def nested(depth: int) -> dict:
    """A JSON object ``depth`` levels deep (``{}`` is one level), built without recursion."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def nested_json(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


# --- metadata nesting ------------------------------------------------------------------------------


def test_the_nesting_bound_is_far_below_the_json_encoders_limit():
    assert 32 <= MAX_NESTING_DEPTH <= 128  # orjson stops at 255 levels, response wrapping included


def test_metadata_at_the_bound_is_stored_and_reads_back_over_http(api: ApiServer):
    key = api.client.create_api_key("nest-reader", role="operator").api_key
    node = api.client.store_memory(
        "nest-reader", {"content": "deep but allowed", "metadata": nested(MAX_NESTING_DEPTH)}
    )
    with api.http(key) as http:
        got = http.get(f"/v1/memories/{node.id}")
        assert got.status_code == 200, got.text
        assert got.json()["metadata"] == nested(MAX_NESTING_DEPTH)
        posted = http.post("/v1/memories", json={"content": "posted", "metadata": nested(MAX_NESTING_DEPTH)})
        assert posted.status_code == 200, posted.text
        assert http.get(f"/v1/memories/{posted.json()['id']}").status_code == 200


@pytest.mark.parametrize("depth", [MAX_NESTING_DEPTH + 1, 254, 960, 5000])
def test_deeper_metadata_is_a_typed_error_naming_field_and_bound_and_writes_nothing(api: ApiServer, depth):
    before = api.rows()
    with pytest.raises(InvalidInput) as refused:
        api.client.store_memory("nest-writer", {"content": "too deep", "metadata": nested(depth)})
    assert refused.value.field == "items[0].metadata"
    assert f"bound of {MAX_NESTING_DEPTH} levels" in str(refused.value)
    assert api.rows() == before
    node = api.client.store_memory("nest-writer", "a node to link")
    before = api.rows()
    with pytest.raises(InvalidInput) as refused:
        api.client.link("nest-writer", node.id, node.id, metadata=nested(depth))
    assert refused.value.field == "metadata" and f"bound of {MAX_NESTING_DEPTH} levels" in str(refused.value)
    assert api.rows() == before


@pytest.mark.parametrize("depth", [MAX_NESTING_DEPTH + 1, 254])
def test_deeper_metadata_over_http_is_422_naming_field_and_bound(api: ApiServer, depth):
    key = api.client.create_api_key("nest-poster", role="operator").api_key
    before = api.rows()
    body = '{"content":"too deep","metadata":' + nested_json(depth) + "}"
    with api.http(key) as http:
        for path, payload in (("/v1/memories", body), ("/v1/memories/batch", '{"items":[' + body + "]}")):
            answer = http.post(path, content=payload, headers={"content-type": "application/json"})
            assert answer.status_code == 422, answer.text
            error = answer.json()["error"]
            assert error["type"] == "invalid_input" and error["field"].endswith("metadata")
            assert f"bound of {MAX_NESTING_DEPTH} levels" in error["message"]
    assert api.rows() == before


# --- prme mcp over stdio: unparseable lines -------------------------------------------------------


class StdioSession:
    """``prme mcp`` as a subprocess: write one line, read the answer line (with a deadline)."""

    def __init__(self, store_url: str, api_key: str) -> None:
        env = {"PATH": str(Path(sys.executable).parent), "PRME_API_KEY": api_key}
        self.process = subprocess.Popen(
            [PRME, "mcp", "--store", store_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def send(self, line: str | dict) -> None:
        text = line if isinstance(line, str) else json.dumps(line)
        self.process.stdin.write(text.encode() + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if ready:
                line = self.process.stdout.readline()
                assert line, "prme mcp closed its output"
                return json.loads(line)
            assert self.process.poll() is None, "prme mcp exited"
        raise AssertionError("prme mcp did not answer in time")

    def close(self) -> int:
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=60)
        finally:
            self.process.stdout.close()


def _parse_error(answer: dict) -> bool:
    """A JSON-RPC 2.0 parse error for a line without a readable id."""
    return answer["jsonrpc"] == "2.0" and answer["id"] is None and answer["error"]["code"] == -32700


def test_prme_mcp_answers_an_unparseable_line_with_a_parse_error_and_keeps_serving(tmp_path):
    url = f"duckdb:///{tmp_path / 'mcp.duckdb'}"
    with MemoryClient(url) as client:
        api_key = client.create_api_key("mcp-prober").api_key
    session = StdioSession(url, api_key)
    try:
        session.send("this is not json")
        assert _parse_error(session.answer())
        session.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        initialized = session.answer()
        assert initialized["id"] == 1 and initialized["result"]["serverInfo"]["name"] == "prme"
        session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        session.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/li')  # cut short
        assert _parse_error(session.answer())
        session.send('{"not": "a message"}')
        invalid = session.answer()
        assert invalid["id"] is None and invalid["error"]["code"] == -32600
        session.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        listed = session.answer()
        assert listed["id"] == 3 and any(t["name"] == "memory_search" for t in listed["result"]["tools"])
    finally:
        assert session.close() == 0
