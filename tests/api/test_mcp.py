"""The MCP server over stdio (issue 18): the SDK's own client session talks to ``prme mcp``
launched as a subprocess, on DuckDB and PostgreSQL. Tool schemas are the HTTP request models;
the owner is the configured key's; isolation, scope limits and bad input as over HTTP.

A DuckDB file is held by one process at a time, so each session runs with the test process's
store closed: setup and row counts happen before and after the sessions.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
import sys
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from prme_api.agent_tools import AGENT_TOOLS
from prme_api.service import OPERATIONS
from prme_core.engine import MemoryClient
from tests.api.conftest import row_counts
from tests.learning_lab import HOLDOUT_CONFIG, LEARNING_CONFIG, NOW, build_lab, feedback_question

SCOPES = ["personal"]
PRME = shutil.which("prme", path=str(Path(sys.executable).parent)) or "prme"


@dataclass
class Setup:
    url: str
    keys: dict[str, str]
    ids: dict[str, dict[str, str]]  # owner -> kind -> one id of that owner's


def _owner_ids(client: MemoryClient, owner: str, node_id) -> dict[str, str]:
    response = client.retrieve("bicycle repair receipts", owner=owner, reference_time=NOW)
    request_id = response.metadata.request_id
    in_context = [r.node_id for r in response.results if r.in_context and r.representation != "reference"]
    feedback = client.record_relevance(
        request_id, {response.results[0].node_id: True}, owner=owner, method="explicit_user"
    )
    citation = client.record_answer_citations(
        request_id, owner=owner, answer_id="a", cited_node_ids=in_context[:1], method="model_reported"
    )
    holdout = client.register_holdout_queries(
        owner, SCOPES, [{"query": f"probe {owner}", "relevant_node_ids": [node_id], "reference_time": NOW}]
    )[0]
    return {
        "node": str(node_id),
        "request": str(request_id),
        "feedback": str(feedback.feedback_id),
        "citation": str(citation.citation_id),
        "holdout": str(holdout.holdout_id),
    }


@pytest.fixture(scope="module")
def setup(module_store_url: str) -> Setup:
    with MemoryClient(module_store_url) as client:
        build_lab(client)
        keys = {
            "alice": client.create_api_key("alice", role="operator").api_key,
            "bob": client.create_api_key("bob", role="operator").api_key,
            "alice_project": client.create_api_key("alice", scopes=["project"], role="operator").api_key,
        }
        alice_node = client.store_memory("alice", "Alice keeps her bicycle repair receipts in a box").id
        bob_node = client.store_memory("bob", "Bob keeps his bicycle repair receipts in a drawer").id
        client.store_memory("alice", {"content": "The project bicycle repair budget is ten", "scope": "project"})
        ids = {"alice": _owner_ids(client, "alice", alice_node), "bob": _owner_ids(client, "bob", bob_node)}
        proposal = client.evaluate_learning("alice", scopes=SCOPES, config=LEARNING_CONFIG)
        holdout = client.evaluate_holdout(proposal, config=HOLDOUT_CONFIG)
        ids["alice"]["profile"] = str(client.create_ranking_profile(proposal, holdout, owner="alice").profile_id)
        ids["bob"]["profile"] = str(uuid.uuid4())  # bob has none: probing a missing id must read the same
    return Setup(module_store_url, keys, ids)


class Tools:
    """One MCP client session: ``await tools.call(name, **arguments)`` → (ok, structured content)."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **arguments):
        result = await self.session.call_tool(name, arguments)
        return not result.is_error, result.structured_content

    async def ok(self, name: str, **arguments):
        ok, content = await self.call(name, **arguments)
        assert ok, (name, content)
        return content

    async def error(self, name: str, **arguments):
        ok, content = await self.call(name, **arguments)
        assert not ok, (name, content)
        return content["error"]


@asynccontextmanager
async def mcp_session(url: str, api_key: str):
    params = StdioServerParameters(command=PRME, args=["mcp", "--store", url], env={"PRME_API_KEY": api_key})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield Tools(session)


def run(coroutine_function, *args):
    return anyio.run(coroutine_function, *args)


def test_tools_are_the_operations_with_the_http_request_models_as_schemas(setup):
    async def main():
        async with mcp_session(setup.url, setup.keys["alice"]) as tools:
            return (await tools.session.list_tools()).tools

    listed = run(main)  # an operator key: the agent tool set, then one tool per operation
    assert [t.name for t in listed] == [t.name for t in AGENT_TOOLS] + [op.name for op in OPERATIONS]
    for tool, op in zip(listed[len(AGENT_TOOLS) :], OPERATIONS, strict=True):
        assert tool.input_schema == op.model.model_json_schema(), op.name
    retrieve = next(t for t in listed if t.name == "memory_retrieve").input_schema["properties"]
    for argument in (
        "reference_time",
        "scopes",
        "time_from",
        "time_to",
        "event_time_from",
        "event_time_to",
        "min_fidelity",
        "include_cross_scope",
        "ranking_multipliers",
        "retrieval_mode",
        "include_context",
    ):
        assert argument in retrieve


def test_every_tool_works_over_stdio(setup):
    async def main():
        async with mcp_session(setup.url, setup.keys["alice"]) as t:
            me = await t.ok("memory_whoami")
            assert me["owner"] == "alice" and me["scopes"] is None
            node = await t.ok("memory_store", content="Alice's kettle is blue", node_type="fact")
            batch = await t.ok("memory_store_batch", items=[{"content": "Alice swims"}, {"content": "Alice rows"}])
            assert (
                len(batch["items"]) == 2
                and (await t.ok("memory_get", node_id=node["id"]))["content"] == node["content"]
            )

            found = await t.ok(
                "memory_retrieve",
                query=feedback_question("cat"),
                scopes=SCOPES,
                reference_time="2024-06-01T09:00:00+09:00",
                time_from=(NOW - timedelta(days=3650)).isoformat(),
                time_to=(NOW + timedelta(days=1)).isoformat(),
                min_fidelity="prose",
                include_cross_scope=False,
                limit=5,
                include_context=True,
                include_bundle=True,
            )
            meta = found["metadata"]
            assert hashlib.sha256(found["context"].encode()).hexdigest() == meta["context_sha256"]
            receipt = await t.ok("memory_get_retrieval_receipt", request_id=meta["request_id"])
            assert receipt["reference_time"] == "2024-06-01T00:00:00Z"  # the aware clock, in UTC
            events = await t.ok(
                "memory_retrieve", query="cat", event_time_from=NOW.isoformat(), event_time_to=NOW.isoformat()
            )
            assert events["results"] == []
            assert "context" not in await t.ok("memory_retrieve", query="cat", include_context=False)

            labels = {r["node_id"]: i == 0 for i, r in enumerate(found["results"])}
            record = await t.ok("memory_record_relevance", request_id=meta["request_id"], labels=labels)
            assert await t.ok("memory_get_relevance", feedback_id=record["feedback_id"]) == record
            page = await t.ok("memory_list_relevance", limit=1000)
            assert record["feedback_id"] in [r["feedback_id"] for r in page["items"]]

            target = next(e["node_id"] for e in found["bundle"]["entries"] if e["has_content"])
            citation = await t.ok(
                "memory_record_answer_citations", request_id=meta["request_id"], answer_id="a1", cited_node_ids=[target]
            )
            assert await t.ok("memory_get_answer_citations", citation_id=citation["citation_id"]) == citation
            listed = await t.ok("memory_list_answer_citations")
            assert citation["citation_id"] in [c["citation_id"] for c in listed["items"]]
            ablation = await t.ok("memory_ablate_context", bundle=found["bundle"], node_ids=[target])
            credit = await t.ok(
                "memory_assess_context_presence",
                ablation=ablation,
                citation_id=citation["citation_id"],
                baseline_correct=True,
                counterfactual_correct=True,
                protocol="reader-v1",
            )
            assert credit["tier"] == "cited_non_flipping"

            proposal = await t.ok("memory_evaluate_learning", scopes=SCOPES, config=LEARNING_CONFIG)
            assert proposal["decision"] == "improved_on_observed_candidates"
            queries = (await t.ok("memory_list_holdout_queries", scopes=SCOPES))["items"]
            extra = await t.ok(
                "memory_register_holdout_queries",
                scopes=SCOPES,
                queries=[{"query": "one more", "relevant_node_ids": [node["id"]], "reference_time": NOW.isoformat()}],
            )
            retired = await t.ok(
                "memory_retire_holdout_queries", scopes=SCOPES, holdout_ids=[extra["items"][0]["holdout_id"]]
            )
            assert retired == {"retired": 1}
            assert len((await t.ok("memory_list_holdout_queries", scopes=SCOPES))["items"]) == len(queries)
            holdout = await t.ok("memory_evaluate_holdout", proposal=proposal, config=HOLDOUT_CONFIG)
            assert holdout["decision"] == "improved_full_retrieval"
            profile = await t.ok("memory_create_ranking_profile", proposal=proposal, holdout=holdout)
            pid = profile["profile_id"]
            assert (await t.ok("memory_get_ranking_profile", profile_id=pid))["active"] is False
            assert pid in [p["profile_id"] for p in (await t.ok("memory_list_ranking_profiles"))["items"]]
            change = str(uuid.uuid4())
            state = await t.ok("memory_activate_ranking_profile", profile_id=pid, change_id=change)
            replay = await t.ok("memory_activate_ranking_profile", profile_id=pid, change_id=change)
            assert (state["replayed"], replay["replayed"]) == (False, True)
            applied = await t.ok("memory_retrieve", query=feedback_question("dog"), scopes=SCOPES)
            assert applied["metadata"]["ranking_profile_status"] == "applied"
            active = await t.ok("memory_get_active_ranking_profile", scopes=SCOPES)
            assert active["profile"]["profile_id"] == pid
            at = await t.ok("memory_get_ranking_profile_at", scopes=SCOPES, at=state["changed_at"])
            assert at["state"]["change_id"] == change
            stale = await t.error("memory_deactivate_ranking_profile", scopes=SCOPES, expected_profile_id=None)
            assert (stale["status"], stale["type"], stale["current_state"]["change_id"]) == (409, "stale_state", change)
            await t.ok("memory_deactivate_ranking_profile", scopes=SCOPES, expected_profile_id=pid)
            await t.ok("memory_rollback_ranking_profile", scopes=SCOPES, profile_id=pid)
            await t.ok("memory_rollback_ranking_profile", scopes=SCOPES, profile_id=None)
            history = await t.ok("memory_list_ranking_profile_history", scopes=SCOPES)
            assert [s["action"] for s in history["items"]][:4] == ["rollback", "rollback", "deactivate", "activate"]

    run(main)


def _probes(ids: dict[str, str]) -> list[tuple[str, dict]]:
    """Every id-taking tool, aimed at one owner's ids."""
    return [
        ("memory_get", {"node_id": ids["node"]}),
        ("memory_get_retrieval_receipt", {"request_id": ids["request"]}),
        ("memory_record_relevance", {"request_id": ids["request"], "labels": {ids["node"]: True}}),
        ("memory_get_relevance", {"feedback_id": ids["feedback"]}),
        ("memory_record_answer_citations", {"request_id": ids["request"], "answer_id": "x", "cited_node_ids": []}),
        ("memory_get_answer_citations", {"citation_id": ids["citation"]}),
        ("memory_get_ranking_profile", {"profile_id": ids["profile"]}),
        ("memory_activate_ranking_profile", {"profile_id": ids["profile"]}),
        ("memory_rollback_ranking_profile", {"scopes": SCOPES, "profile_id": ids["profile"]}),
        ("memory_retire_holdout_queries", {"scopes": SCOPES, "holdout_ids": [ids["holdout"]]}),
    ]


def test_randomized_isolation_and_scope_limits_over_stdio(setup):
    rng = random.Random(1818)
    with MemoryClient(setup.url) as client:
        before = row_counts(client)

    async def probe(prober: str, victim: str) -> list[str]:
        calls = [(name, args, True) for name, args in _probes(setup.ids[victim])]
        missing = {k: str(uuid.uuid4()) for k in setup.ids[victim]}
        calls += [(name, args, False) for name, args in _probes(missing)]
        rng.shuffle(calls)
        leaks = []
        async with mcp_session(setup.url, setup.keys[prober]) as t:
            for name, args, foreign in calls * 2:
                error = await t.error(name, **args)
                assert (error["status"], error["type"]) == (404, "not_found"), (prober, name, error)
                assert set(error) == {"type", "resource", "message", "status"}
                if foreign:
                    listed = str([await t.ok(n) for n in ("memory_list_relevance", "memory_list_answer_citations")])
                    leaks += [v for v in setup.ids[victim].values() if v in listed]
        return leaks

    assert run(probe, "bob", "alice") == [] and run(probe, "alice", "bob") == []
    with MemoryClient(setup.url) as client:
        assert row_counts(client) == before  # no probe wrote anything

    async def limited():
        async with mcp_session(setup.url, setup.keys["alice_project"]) as t:
            for name, args in (
                ("memory_store", {"content": "x"}),
                ("memory_retrieve", {"query": "cat", "scopes": ["personal"]}),
                ("memory_retrieve", {"query": "cat", "include_cross_scope": True}),
                ("memory_evaluate_learning", {"scopes": ["personal"]}),
                ("memory_list_ranking_profile_history", {"scopes": ["personal"]}),
            ):
                error = await t.error(name, **args)
                assert (error["status"], error["type"]) == (403, "scope_forbidden") and error["field"], (name, error)
            for name, args in _probes(setup.ids["alice"]):  # alice's own personal records, outside the key
                status = 403 if "scopes" in args else 404  # naming a scope is refused; an id reads as absent
                assert (await t.error(name, **args))["status"] == status, name
            own = await t.ok("memory_retrieve", query="bicycle repair budget")
            assert {r["scope"] for r in own["results"]} == {"project"}

    run(limited)
    with MemoryClient(setup.url) as client:
        after = row_counts(client)
    # only the one permitted retrieval wrote: its receipt and its projection
    assert {t: after[t] - before[t] for t in after if after[t] != before[t]} == {
        "operations": 1,
        "receipt_projections": 1,
    }


BAD_ARGUMENTS = [
    ("memory_retrieve", {"query": "cat", "limit": "5"}, "limit"),
    ("memory_retrieve", {"query": "cat", "include_cross_scope": "yes"}, "include_cross_scope"),
    ("memory_record_relevance", {"request_id": str(uuid.uuid4()), "labels": {str(uuid.uuid4()): 1}}, "labels"),
    (
        "memory_retrieve",
        {"query": "cat", "ranking_multipliers": {"lexical": float("nan")}},
        "ranking_multipliers.lexical",
    ),
    ("memory_retrieve", {"query": "cat", "reference_time": "2024-06-01T00:00:00"}, "reference_time"),
    ("memory_store", {"content": "x", "valid_from": "2024-06-01T00:00:00"}, "valid_from"),
    ("memory_retrieve", {"query": "cat", "limit": 0}, "limit"),
    ("memory_store", {"content": "x", "confidence": -0.1}, "confidence"),
    ("memory_store", {"content": "x" * 70_000}, "content"),
    ("memory_list_relevance", {"limit": 5000}, "limit"),
    ("memory_store", {"content": "x", "owner": "bob"}, "owner"),
    ("memory_retrieve", {"query": "cat", "user_id": "bob"}, "user_id"),
    ("memory_get", {"node_id": "not-a-uuid"}, "node_id"),
    ("memory_no_such_tool", {}, "name"),
]


def test_bad_arguments_name_the_field_and_write_nothing(setup):
    with MemoryClient(setup.url) as client:
        before = row_counts(client)

    async def main():
        async with mcp_session(setup.url, setup.keys["alice"]) as t:
            for name, arguments, field in BAD_ARGUMENTS:
                error = await t.error(name, **arguments)
                assert error["status"] == 422 and error["field"].startswith(field), (name, error)
                assert field in error["message"]

    run(main)
    with MemoryClient(setup.url) as client:
        assert row_counts(client) == before


def test_prme_mcp_refuses_to_start_without_a_valid_key(setup):
    with MemoryClient(setup.url) as client:
        revoked = client.create_api_key("alice")
        client.revoke_api_key(revoked.key.key_id)
    for env, says in (({}, "PRME_API_KEY is not set"), ({"PRME_API_KEY": revoked.api_key}, "was revoked")):
        done = subprocess.run(
            [PRME, "mcp", "--store", setup.url],
            env={"PATH": str(Path(sys.executable).parent), **env},
            input="",
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert done.stdout == ""  # stdout is the protocol's: nothing else is ever written there


def test_a_key_revoked_during_a_session_is_refused_on_the_next_call(setup, module_store_url):
    if module_store_url.startswith("duckdb"):
        pytest.skip("a DuckDB file is open in one process at a time: revoke while serving needs PostgreSQL")
    with MemoryClient(setup.url) as client:
        created = client.create_api_key("alice")

    async def main():
        async with mcp_session(setup.url, created.api_key) as t:
            assert (await t.ok("memory_whoami"))["owner"] == "alice"
            with MemoryClient(setup.url) as client:
                client.revoke_api_key(created.key.key_id)
            error = await t.error("memory_whoami")
            assert (error["status"], error["reason"]) == (401, "revoked")

    run(main)
