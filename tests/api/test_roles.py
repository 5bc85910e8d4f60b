"""Key roles over a real server (both backends): an agent key stores, reads, retrieves and judges;
what changes ranking or its evidence (keys, holdout queries, learning, profiles) needs an operator
key, and MCP lists only the tools a key may call. Operators mint, list and revoke their owner's
keys while the server runs."""

from __future__ import annotations

import uuid

import anyio
import pytest

from prme_api.agent_tools import AGENT_TOOLS
from prme_api.service import OPERATIONS
from tests.api.conftest import ApiServer

OPERATOR_ROUTES = (
    ("post", "/v1/learning/evaluate", {"scopes": ["personal"]}),
    ("get", "/v1/holdout/queries?scopes=personal", None),
    ("get", "/v1/profiles", None),
    ("get", "/v1/keys", None),
    ("post", "/v1/keys", {"role": "agent"}),
    ("post", "/v1/profiles/deactivate", {"scopes": ["personal"]}),
)


@pytest.fixture(scope="module")
def keys(api: ApiServer) -> dict[str, str]:
    client = api.client
    return {
        "agent": client.create_api_key("carol").api_key,
        "operator": client.create_api_key("carol", role="operator").api_key,
        "dave_operator": client.create_api_key("dave", role="operator").api_key,
        "project_operator": client.create_api_key("carol", scopes=["project"], role="operator").api_key,
    }


def _call(http, method, path, body):
    return http.request(method.upper(), path, json=body) if body is not None else http.request(method.upper(), path)


def test_an_agent_key_is_refused_every_operator_route_with_403_naming_its_role(api, keys):
    before = api.rows()
    with api.http(keys["agent"]) as http:
        for method, path, body in OPERATOR_ROUTES:
            response = _call(http, method, path, body)
            assert response.status_code == 403, (path, response.text)
            error = response.json()["error"]
            assert error["type"] == "role_forbidden" and "'agent'" in error["message"], path
            assert (error["role"], error["needed_role"]) == ("agent", "operator")
    assert api.rows() == before  # nothing written


def test_an_agent_key_stores_retrieves_and_judges(api, keys):
    with api.http(keys["agent"]) as http:
        stored = http.post("/v1/memories", json={"content": "Carol's kayak is red"})
        assert stored.status_code == 200, stored.text
        found = http.post("/v1/retrieve", json={"query": "what colour is the kayak", "limit": 3}).json()
        request_id = found["metadata"]["request_id"]
        node = found["results"][0]["node_id"]
        judged = http.post("/v1/relevance", json={"request_id": request_id, "labels": {node: True}})
        assert judged.status_code == 200, judged.text
        assert http.get("/v1/whoami").json()["role"] == "agent"


def test_an_operator_mints_lists_and_revokes_its_owners_keys_while_the_server_runs(api, keys):
    with api.http(keys["operator"]) as http:
        created = http.post("/v1/keys", json={"role": "agent", "scopes": ["personal"]})
        assert created.status_code == 200, created.text
        body = created.json()
        new_key, key_id = body["api_key"], body["key"]["key_id"]
        assert body["key"]["owner"] == "carol" and body["key"]["role"] == "agent"
        listed = http.get("/v1/keys").json()["items"]
        assert key_id in {k["key"]["key_id"] for k in listed}
        assert all("api_key" not in k and k["key"]["owner"] == "carol" for k in listed)
    with api.http(new_key) as http:
        assert http.get("/v1/whoami").json() == {**http.get("/v1/whoami").json(), "owner": "carol", "role": "agent"}
    with api.http(keys["operator"]) as http:
        assert http.delete(f"/v1/keys/{key_id}").status_code == 200
    with api.http(new_key) as http:
        assert http.get("/v1/whoami").status_code == 401


def test_another_owners_key_id_reads_as_unknown_to_an_operator(api, keys):
    dave_agent = api.client.create_api_key("dave").key.key_id
    with api.http(keys["operator"]) as http:
        foreign = http.delete(f"/v1/keys/{dave_agent}")
        missing = http.delete(f"/v1/keys/{uuid.uuid4().hex[:24]}")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()


def test_a_scope_limited_operator_mints_keys_only_within_its_scopes(api, keys):
    with api.http(keys["project_operator"]) as http:
        outside = http.post("/v1/keys", json={"scopes": ["personal"]})
        inside = http.post("/v1/keys", json={})
    assert outside.status_code == 403 and outside.json()["error"]["type"] == "scope_forbidden"
    assert inside.status_code == 200 and inside.json()["key"]["scopes"] == ["project"]


def _tools(url: str, key: str) -> tuple[set[str], object]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
            async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    refused = await session.call_tool("memory_list_api_keys", {})
                    return {t.name for t in listed.tools}, refused

    return anyio.run(run)


def test_mcp_lists_only_the_tools_a_key_may_call(api, keys):
    agent_tools, refused = _tools(api.url, keys["agent"])
    operator_tools, allowed = _tools(api.url, keys["operator"])
    assert agent_tools == {t.name for t in AGENT_TOOLS}
    assert operator_tools == {t.name for t in AGENT_TOOLS} | {op.name for op in OPERATIONS}
    assert refused.is_error and refused.structured_content["error"]["status"] == 403
    assert refused.structured_content["error"]["type"] == "role_forbidden"
    assert not allowed.is_error


def test_a_scope_limited_operator_learns_nothing_of_the_owners_other_scopes(api):
    """Learning reports and holdout registration treat another scope's records as absent."""
    from tests.learning_lab import build_lab

    client = api.client
    build_lab(client, owner="frank")  # personal-scope memories and feedback
    client.store_memory("frank", {"content": "The project budget note", "scope": "project"})
    personal_node = client.scan("frank", scopes=["personal"], limit=1).items[0].id
    limited = client.create_api_key("frank", scopes=["project"], role="operator").api_key
    whole = client.create_api_key("frank", role="operator").api_key
    with api.http(whole) as http:
        full = http.post("/v1/learning/evaluate", json={"scopes": ["personal"]}).json()
    assert full["feedback_ids"]  # the personal feedback exists
    spec = {"query": "where is the budget", "reference_time": "2024-06-01T00:00:00Z"}
    random_id = uuid.uuid4()
    with api.http(limited) as http:
        mine = http.post("/v1/learning/evaluate", json={"scopes": ["project"]}).json()
        named = http.post(
            "/v1/holdout/queries",
            json={"scopes": ["project"], "queries": [{**spec, "relevant_node_ids": [str(personal_node)]}]},
        )
        unknown = http.post(
            "/v1/holdout/queries",
            json={"scopes": ["project"], "queries": [{**spec, "relevant_node_ids": [str(random_id)]}]},
        )
    # the limited key's report names no personal feedback, receipt or even a count of it
    assert mine["feedback_ids"] == [] and mine["receipt_checksums"] == {} and mine["exclusions"] == {}
    assert named.status_code == unknown.status_code == 422
    assert named.json()["error"]["message"].replace(str(personal_node), "ID") == unknown.json()["error"][
        "message"
    ].replace(str(random_id), "ID")
