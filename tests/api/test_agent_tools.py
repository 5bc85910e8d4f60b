"""The agent tool set over a real server and the official MCP client (streamable HTTP, both
backends): at most 8 tools and 8 KB of schemas, each saying when to call it, every parameter
described, annotated and with an output schema; the judgment call after answering records a
record learning can use, and says why when it cannot."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from prme_api.agent_tools import AGENT_TOOLS
from tests.api.conftest import ApiServer

OWNER = "gina"
MAX_TOOLS, MAX_SCHEMA_BYTES = 8, 8192


@pytest.fixture(scope="module")
def agent_key(api: ApiServer) -> str:
    api.client.store_batch(
        OWNER,
        [
            "Gina's sister lives in Porto",
            "Gina adopted a grey cat named Pixel in March",
            "Gina prefers window seats on trains",
            "Gina's cat Pixel eats salmon",
        ],
    )
    return api.client.create_api_key(OWNER).api_key


async def _session(url: str, key: str, body: Any) -> Any:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


def test_the_agent_set_is_small_described_annotated_and_typed(api, agent_key):
    async def body(session):
        return (await session.list_tools()).tools

    tools = anyio.run(_session, api.url, agent_key, body)
    assert [t.name for t in tools] == [t.name for t in AGENT_TOOLS] and len(tools) <= MAX_TOOLS
    size = sum(len(json.dumps(t.input_schema)) + len(json.dumps(t.output_schema)) for t in tools)
    assert size <= MAX_SCHEMA_BYTES, size
    for tool in tools:
        assert tool.description.startswith("Call "), tool.name  # says when to call it
        assert tool.output_schema and tool.annotations is not None
        a = tool.annotations
        assert a.destructive_hint is False and a.open_world_hint is False
        assert a.read_only_hint is not None and a.idempotent_hint is not None
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), (tool.name, name)


def test_search_then_judge_records_a_judgment_learning_can_use(api, agent_key):
    async def body(session):
        found = await session.call_tool("memory_search", {"query": "what is the name of Gina's cat", "limit": 4})
        results = found.structured_content["results"]
        used = [r["node_id"] for r in results if "Pixel" in r["content"]][:1]
        judged = await session.call_tool(
            "memory_judge", {"request_id": found.structured_content["request_id"], "used": used}
        )
        again = await session.call_tool(
            "memory_judge", {"request_id": found.structured_content["request_id"], "used": used}
        )
        other = await session.call_tool(
            "memory_judge", {"request_id": found.structured_content["request_id"], "used": []}
        )
        return found, judged, again, other

    found, judged, again, other = anyio.run(_session, api.url, agent_key, body)
    assert not found.is_error and len(found.structured_content["results"]) == 4
    out = judged.structured_content
    assert not judged.is_error and out["usable_for_learning"] and (out["relevant"], out["not_relevant"]) == (1, 3)
    assert again.structured_content == out  # a retry is the same judgment
    assert other.is_error and other.structured_content["error"]["status"] == 409  # the first judgment stands
    record = api.client.get_relevance(out["feedback_id"], OWNER)
    assert record.method == "agent_judgment" and sum(record.labels.values()) == 1 and len(record.labels) == 4


def test_a_judgment_learning_cannot_use_says_why(api, agent_key):
    async def body(session):
        found = await session.call_tool("memory_search", {"query": "where does Gina's sister live", "limit": 2})
        request = found.structured_content["request_id"]
        every = [r["node_id"] for r in found.structured_content["results"]]
        return await session.call_tool("memory_judge", {"request_id": request, "used": every})

    judged = anyio.run(_session, api.url, agent_key, body)
    out = judged.structured_content
    assert not judged.is_error and not out["usable_for_learning"] and "every shown result was used" in out["reason"]


def test_judging_a_result_it_was_not_shown_or_another_owners_search_is_refused(api, agent_key):
    other = api.client.create_api_key("hank").api_key

    async def search(session):
        return (await session.call_tool("memory_search", {"query": "cat", "limit": 2})).structured_content

    mine = anyio.run(_session, api.url, agent_key, search)

    async def judge_foreign(session):
        return await session.call_tool("memory_judge", {"request_id": mine["request_id"], "used": []})

    async def judge_unshown(session):
        return await session.call_tool(
            "memory_judge", {"request_id": mine["request_id"], "used": ["00000000-0000-4000-8000-000000000000"]}
        )

    foreign = anyio.run(_session, api.url, other, judge_foreign)
    unshown = anyio.run(_session, api.url, agent_key, judge_unshown)
    assert foreign.is_error and foreign.structured_content["error"]["status"] == 404
    assert unshown.is_error and unshown.structured_content["error"]["status"] == 422


def test_remember_and_read_round_trip(api, agent_key):
    async def body(session):
        stored = await session.call_tool("memory_remember", {"content": "Gina starts a pottery class in May"})
        read = await session.call_tool("memory_read", {"node_id": stored.structured_content["node_id"]})
        me = await session.call_tool("memory_whoami", {})
        return stored, read, me

    stored, read, me = anyio.run(_session, api.url, agent_key, body)
    assert not stored.is_error and read.structured_content["content"] == "Gina starts a pottery class in May"
    assert (me.structured_content["owner"], me.structured_content["role"]) == (OWNER, "agent")
