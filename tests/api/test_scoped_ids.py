"""Ids a scope-limited key chooses for new records (issue 27), over a real server on both backends:
such a key chooses them in a namespace of its owner and scope set, so an id that belongs to a
record outside its scopes is written exactly like one never used (same status, same body but for
the id and the clock), a retry from any key with the same scope limit finds the first record, and
a key without a scope limit keeps the raw ids (409 when its owner used one already)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from prme_api.http import API_DESCRIPTION
from prme_api.service import scoped_id
from prme_core.access.keys import Principal
from tests.api.conftest import ApiServer
from tests.learning_lab import HOLDOUT_CONFIG, LEARNING_CONFIG, NOW, build_lab

OWNER = "gina"
PROFILE_OWNER = "hana"
PROJECT = ["project"]


@dataclass(frozen=True)
class Kind:
    """A write that takes a caller-chosen id: its route, a body (``variant`` 0 or 1: two contents)
    for a chosen id, where the response names the record's id, and where the record is read."""

    path: str
    body: Callable[[World, str, int], dict[str, Any]]
    id_of: Callable[[dict[str, Any]], str]
    read: str


@dataclass
class World:
    api: ApiServer
    whole: str  # the owner's key without a scope limit
    project: str  # two keys limited to the project scope
    project_too: str
    wider: str  # a key limited to personal and project
    personal_request: str  # a retrieval within the personal scope and a memory it showed
    personal_node: str
    project_request: str  # the same within the project scope
    project_node: str

    def taken(self, name: str) -> str:
        """The id of a new personal record of the kind ``name`` writes (stored by the key without a
        limit): an id in use outside the project scope."""
        chosen = str(uuid.uuid4())
        path, body = {
            "memory": ("/v1/memories", {"content": "Gina's cat has its checkup in May", "id": chosen}),
            "feedback": (
                "/v1/relevance",
                {"request_id": self.personal_request, "labels": {self.personal_node: True}, "feedback_id": chosen},
            ),
            "citation": (
                "/v1/answer-citations",
                {
                    "request_id": self.personal_request,
                    "answer_id": "personal",
                    "cited_node_ids": [self.personal_node],
                    "citation_id": chosen,
                },
            ),
        }["memory" if name == "batch" else name]
        with self.api.http(self.whole) as http:
            stored = http.post(path, json=body)
        assert stored.status_code == 200, stored.text
        return chosen


@pytest.fixture(scope="module")
def world(api: ApiServer) -> World:
    client = api.client
    keys = {
        name: client.create_api_key(OWNER, scopes=scopes, role="operator").api_key
        for name, scopes in (
            ("whole", None),
            ("project", PROJECT),
            ("project_too", PROJECT),
            ("wider", ["personal", "project"]),
        )
    }
    with api.http(keys["whole"]) as http:
        personal_node = http.post("/v1/memories", json={"content": "Gina's cat has its checkup in May"}).json()["id"]
        project_node = http.post(
            "/v1/memories", json={"content": "The project's bicycle budget is ten euros", "scope": "project"}
        ).json()["id"]
        personal = _retrieve(http, "when is the cat's checkup", ["personal"])
    with api.http(keys["project"]) as http:
        project = _retrieve(http, "what is the bicycle budget", PROJECT)
    return World(
        api,
        keys["whole"],
        keys["project"],
        keys["project_too"],
        keys["wider"],
        personal,
        personal_node,
        project,
        project_node,
    )


def _retrieve(http, query: str, scopes: list[str]) -> str:
    response = http.post("/v1/retrieve", json={"query": query, "scopes": scopes, "reference_time": NOW.isoformat()})
    assert response.status_code == 200, response.text
    return response.json()["metadata"]["request_id"]


KINDS = {
    "memory": Kind(
        "/v1/memories",
        lambda w, chosen, v: {"content": f"Project note {v}", "scope": "project", "id": chosen},
        lambda b: b["id"],
        "/v1/memories/{}",
    ),
    "batch": Kind(
        "/v1/memories/batch",
        lambda w, chosen, v: {"items": [{"content": f"Project note {v}", "scope": "project", "id": chosen}]},
        lambda b: b["items"][0]["id"],
        "/v1/memories/{}",
    ),
    "feedback": Kind(
        "/v1/relevance",
        lambda w, chosen, v: {
            "request_id": w.project_request,
            "labels": {w.project_node: v == 0},
            "feedback_id": chosen,
        },
        lambda b: b["feedback_id"],
        "/v1/relevance/{}",
    ),
    "citation": Kind(
        "/v1/answer-citations",
        lambda w, chosen, v: {
            "request_id": w.project_request,
            "answer_id": f"answer-{v}",
            "cited_node_ids": [w.project_node],
            "citation_id": chosen,
        },
        lambda b: b["citation_id"],
        "/v1/answer-citations/{}",
    ),
}


def _shape(body: Any, own_id: str) -> Any:
    """``body`` with the record's own id and every time (``*_at``, validity start) made constant:
    what two writes of the same content under two ids must share."""
    if isinstance(body, dict):
        return {
            k: "TIME" if k.endswith("_at") or k == "valid_from" else _shape(v, own_id) for k, v in sorted(body.items())
        }
    if isinstance(body, list):
        return [_shape(v, own_id) for v in body]
    return "ID" if body == own_id else body


def _record(body: dict[str, Any], name: str) -> dict[str, Any]:
    """The record a write returned (a batch's one item)."""
    return body["items"][0] if name == "batch" else body


def _written(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {table: after[table] - before[table] for table in before}


@pytest.mark.parametrize("name", list(KINDS))
def test_an_id_taken_outside_the_keys_scopes_is_written_like_a_never_used_one(world, name):
    kind, api = KINDS[name], world.api
    taken, unused = world.taken(name), str(uuid.uuid4())
    with api.http(world.whole) as whole, api.http(world.project) as http:
        personal_before = whole.get(kind.read.format(taken)).json()
        rows = [api.rows()]
        reused = http.post(kind.path, json=kind.body(world, taken, 0))
        rows.append(api.rows())
        fresh = http.post(kind.path, json=kind.body(world, unused, 0))
        rows.append(api.rows())
        assert reused.status_code == fresh.status_code == 200, (reused.text, fresh.text)
        reused_id, fresh_id = kind.id_of(reused.json()), kind.id_of(fresh.json())
        assert _shape(reused.json(), reused_id) == _shape(fresh.json(), fresh_id)
        assert _written(rows[0], rows[1]) == _written(rows[1], rows[2]) and sum(_written(rows[0], rows[1]).values())
        assert reused_id not in (taken, fresh_id)
        # the record is read by the id the response gave; the chosen id is not translated
        assert http.get(kind.read.format(reused_id)).json() == _record(reused.json(), name)
        assert http.get(kind.read.format(taken)).status_code == 404
        assert whole.get(kind.read.format(taken)).json() == personal_before  # the personal record is untouched


@pytest.mark.parametrize("name", ["feedback", "citation"])
def test_a_retry_from_any_key_with_the_same_scope_limit_returns_the_first_record(world, name):
    kind, api = KINDS[name], world.api
    chosen = world.taken(name)  # in use outside the scope, which makes no difference
    with api.http(world.project) as http, api.http(world.project_too) as other:
        first = http.post(kind.path, json=kind.body(world, chosen, 1))
        assert first.status_code == 200, first.text
        before = api.rows()
        retry = http.post(kind.path, json=kind.body(world, chosen, 1))
        again = other.post(kind.path, json=kind.body(world, chosen, 1))
        assert retry.status_code == again.status_code == 200, (retry.text, again.text)
        assert retry.json() == again.json() == first.json()  # the first record, recorded_at and all
        assert api.rows() == before
        conflict = other.post(kind.path, json=kind.body(world, chosen, 0))
    assert conflict.status_code == 409, conflict.text
    error = conflict.json()["error"]
    assert error["type"] == "idempotency_conflict"
    assert kind.id_of(first.json()) in error["message"] and chosen in error["message"]  # stored and chosen ids
    assert api.rows() == before


@pytest.mark.parametrize("name", ["memory", "batch"])
def test_a_memory_id_is_spent_for_every_key_with_the_same_scope_limit_and_unseen_by_other_limits(world, name):
    """Memory ids are never idempotent: a reuse is 409 from any key of the namespace (as for a key
    without a limit), while a key with another scope limit chooses the same id in its own."""
    kind, api = KINDS[name], world.api
    chosen = str(uuid.uuid4())
    with api.http(world.project) as http, api.http(world.project_too) as other, api.http(world.wider) as wider:
        first = http.post(kind.path, json=kind.body(world, chosen, 0))
        assert first.status_code == 200, first.text
        before = api.rows()
        for key in (http, other):
            reused = key.post(kind.path, json=kind.body(world, chosen, 0))
            assert reused.status_code == 409 and reused.json()["error"]["type"] == "idempotency_conflict"
            assert chosen in reused.json()["error"]["message"]
        assert api.rows() == before
        elsewhere = wider.post(kind.path, json=kind.body(world, chosen, 0))
    assert elsewhere.status_code == 200, elsewhere.text
    assert kind.id_of(elsewhere.json()) not in (chosen, kind.id_of(first.json()))


@pytest.mark.parametrize("name", list(KINDS))
def test_a_key_without_a_scope_limit_gets_409_for_an_id_its_owner_used(world, name):
    kind, api = KINDS[name], world.api
    taken = world.taken(name)
    before = api.rows()
    with api.http(world.whole) as http:
        reused = http.post(kind.path, json=kind.body(world, taken, 0))
    assert reused.status_code == 409, reused.text
    assert reused.json()["error"]["type"] == "idempotency_conflict" and taken in reused.json()["error"]["message"]
    assert api.rows() == before


def test_a_refused_write_from_a_limited_key_writes_nothing(world):
    """Refusals the engine makes after the ids are derived: nothing is written."""
    memory, feedback, citation = world.taken("memory"), world.taken("feedback"), world.taken("citation")
    before = world.api.rows()
    with world.api.http(world.project) as http:
        for path, body in (
            ("/v1/memories/batch", {"items": [{"content": "x", "scope": "project", "id": memory}] * 2}),
            (
                "/v1/relevance",  # a label for a memory that retrieval did not return
                {"request_id": world.project_request, "labels": {world.personal_node: True}, "feedback_id": feedback},
            ),
            (
                "/v1/answer-citations",  # a citation of a memory outside that retrieval's context
                {
                    "request_id": world.project_request,
                    "answer_id": "a",
                    "cited_node_ids": [world.personal_node],
                    "citation_id": citation,
                },
            ),
        ):
            response = http.post(path, json=body)
            assert response.status_code == 422, (path, response.text)
    assert world.api.rows() == before


def test_mcp_tools_store_a_limited_keys_chosen_id_as_the_http_routes_do(world):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    chosen = world.taken("feedback")
    body = KINDS["feedback"].body(world, chosen, 0)

    async def run():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {world.project}"}) as http:
            async with streamable_http_client(f"{world.api.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("memory_record_relevance", body)

    result = anyio.run(run)
    assert not result.is_error, result.structured_content
    stored = result.structured_content["feedback_id"]
    with world.api.http(world.project_too) as http:
        retry = http.post("/v1/relevance", json=body)
    assert retry.status_code == 200 and retry.json() == result.structured_content  # the MCP record, found by HTTP
    assert stored != chosen


def test_the_stored_id_is_the_documented_uuid5():
    chosen = uuid.UUID("0b6e3d2a-7c41-4f58-a9d3-5e2f1c7b8a90")
    name = '["prme:scoped-id:v1","alice",["project"],"feedback","0b6e3d2a-7c41-4f58-a9d3-5e2f1c7b8a90"]'
    assert f"`{name}`" in " ".join(API_DESCRIPTION.split())
    limited = Principal(key_id="0" * 24, owner="alice", scopes=("project",))
    assert scoped_id(limited, "feedback", chosen) == uuid.uuid5(uuid.NAMESPACE_URL, name)
    wider = Principal(key_id="0" * 24, owner="alice", scopes=("personal", "project"))
    assert len({scoped_id(limited, k, chosen) for k in ("memory", "feedback", "citation")}) == 3
    assert scoped_id(wider, "feedback", chosen) != scoped_id(limited, "feedback", chosen)
    assert scoped_id(Principal(key_id="0" * 24, owner="alice"), "feedback", chosen) == chosen  # no limit: raw id


# --- profiles and pointer changes (operator keys; the evidence is two learning labs) ---------------


@dataclass
class Evidence:
    api: ApiServer
    whole: str
    project: str
    project_too: str
    reports: dict[str, Any]  # the project scope's proposal and holdout, as the server returned them
    profile: str  # the personal scope's profile
    changes: list[str]  # the personal pointer's changes: activate, deactivate, activate


@pytest.fixture(scope="module")
def evidence(api: ApiServer) -> Evidence:
    client = api.client
    build_lab(client, owner=PROFILE_OWNER)
    build_lab(client, owner=PROFILE_OWNER, scopes=("project",))
    whole = client.create_api_key(PROFILE_OWNER, role="operator").api_key
    project, project_too = (
        client.create_api_key(PROFILE_OWNER, scopes=PROJECT, role="operator").api_key for _ in range(2)
    )
    reports = {}
    for key, scopes in ((whole, ["personal"]), (project, PROJECT)):
        with api.http(key) as http:
            proposal = http.post("/v1/learning/evaluate", json={"scopes": scopes, "config": LEARNING_CONFIG})
            assert proposal.status_code == 200, proposal.text
            holdout = http.post("/v1/learning/holdout", json={"proposal": proposal.json(), "config": HOLDOUT_CONFIG})
            assert holdout.status_code == 200, holdout.text
            reports[scopes[0]] = {"proposal": proposal.json(), "holdout": holdout.json()}
    profile, changes = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in range(3)]
    with api.http(whole) as http:
        created = http.post("/v1/profiles", json={**reports["personal"], "profile_id": profile})
        assert created.status_code == 200, created.text
        for path, body in (
            (f"/v1/profiles/{profile}/activate", {"change_id": changes[0]}),
            ("/v1/profiles/deactivate", {"scopes": ["personal"], "change_id": changes[1]}),
            (f"/v1/profiles/{profile}/activate", {"change_id": changes[2]}),
        ):
            assert http.post(path, json=body).status_code == 200
    with api.http(project) as http:  # the project pointer's first change, so that later ones write alike
        first = http.post("/v1/profiles", json=reports["project"]).json()["profile_id"]
        assert http.post(f"/v1/profiles/{first}/activate", json={}).status_code == 200
        _to_base_scoring(http)
    return Evidence(api, whole, project, project_too, reports["project"], profile, changes)


def _to_base_scoring(http) -> None:
    if http.get("/v1/profiles/active", params={"scopes": PROJECT}).json()["profile"] is not None:
        assert http.post("/v1/profiles/deactivate", json={"scopes": PROJECT}).status_code == 200


def _personal_state(http, profile: str) -> tuple[Any, Any]:
    history = http.get("/v1/profiles/history", params={"scopes": ["personal"]}).json()
    return http.get(f"/v1/profiles/{profile}").json(), history


def test_a_profile_id_or_change_id_taken_outside_the_keys_scopes_is_written_like_a_never_used_one(evidence):
    api = evidence.api
    with api.http(evidence.whole) as whole, api.http(evidence.project) as http:
        personal_before = _personal_state(whole, evidence.profile)
        _to_base_scoring(http)
        rows = [api.rows()]
        reused = http.post("/v1/profiles", json={**evidence.reports, "profile_id": evidence.profile})
        rows.append(api.rows())
        fresh = http.post("/v1/profiles", json={**evidence.reports, "profile_id": str(uuid.uuid4())})
        rows.append(api.rows())
        assert reused.status_code == fresh.status_code == 200, (reused.text, fresh.text)
        profile = reused.json()["profile_id"]
        assert _shape(reused.json(), profile) == _shape(fresh.json(), fresh.json()["profile_id"])
        assert _written(rows[0], rows[1]) == _written(rows[1], rows[2]) and sum(_written(rows[0], rows[1]).values())
        assert profile != evidence.profile and http.get(f"/v1/profiles/{profile}").status_code == 200
        assert http.get(f"/v1/profiles/{evidence.profile}").status_code == 404  # the chosen id is not translated
        # a change id: activate with the personal change's id, back to base, activate with a new one
        changes = []
        for change_id in (evidence.changes[0], str(uuid.uuid4())):
            before = api.rows()
            activated = http.post(f"/v1/profiles/{profile}/activate", json={"change_id": change_id})
            changes.append((activated, _written(before, api.rows())))
            assert activated.status_code == 200, activated.text
            _to_base_scoring(http)
        (reused, reused_rows), (fresh, fresh_rows) = changes
        assert _shape(reused.json(), reused.json()["change_id"]) == _shape(fresh.json(), fresh.json()["change_id"])
        assert reused_rows == fresh_rows and reused.json()["change_id"] != evidence.changes[0]
        assert _personal_state(whole, evidence.profile) == personal_before  # the personal records are untouched


def test_profile_and_change_retries_from_keys_with_the_same_scope_limit_return_the_first_record(evidence):
    api = evidence.api
    chosen_profile, chosen_change = str(uuid.uuid4()), evidence.changes[2]  # in use outside the scope
    with api.http(evidence.project) as http, api.http(evidence.project_too) as other:
        _to_base_scoring(http)
        first = http.post("/v1/profiles", json={**evidence.reports, "profile_id": chosen_profile})
        assert first.status_code == 200, first.text
        profile = first.json()["profile_id"]
        assert (
            other.post("/v1/profiles", json={**evidence.reports, "profile_id": chosen_profile}).json() == first.json()
        )
        activated = http.post(f"/v1/profiles/{profile}/activate", json={"change_id": chosen_change})
        assert activated.status_code == 200, activated.text
        before = api.rows()
        replays = [
            key.post(f"/v1/profiles/{profile}/activate", json={"change_id": chosen_change}) for key in (http, other)
        ]
        for replay in replays:
            assert replay.status_code == 200 and replay.json()["replayed"] is True, replay.text
            assert replay.json()["change_id"] == activated.json()["change_id"]
        conflict = other.post("/v1/profiles/deactivate", json={"scopes": PROJECT, "change_id": chosen_change})
        assert conflict.status_code == 409 and conflict.json()["error"]["type"] == "idempotency_conflict"
        assert chosen_change in conflict.json()["error"]["message"]
        assert api.rows() == before
        _to_base_scoring(http)


def test_a_key_without_a_scope_limit_gets_409_for_a_profile_or_change_id_its_owner_used(evidence):
    api = evidence.api
    with api.http(evidence.project) as http:
        profile = http.post("/v1/profiles", json=evidence.reports).json()["profile_id"]
        _to_base_scoring(http)
    before = api.rows()
    with api.http(evidence.whole) as whole:
        for response in (
            whole.post("/v1/profiles", json={**evidence.reports, "profile_id": evidence.profile}),
            whole.post(f"/v1/profiles/{profile}/activate", json={"change_id": evidence.changes[0]}),
        ):
            assert response.status_code == 409, response.text
            assert response.json()["error"]["type"] == "idempotency_conflict"
    assert api.rows() == before
