"""The HTTP API against a real uvicorn server on 127.0.0.1 (issue 18), on DuckDB and PostgreSQL:
every route, owners bound to keys, scope limits, randomized isolation probes and bad input."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest

from prme_core.receipts.model import RetrievalReceipt
from prme_core.types import utc_now
from tests.api.conftest import SMALL_BODY_LIMIT, ApiServer
from tests.learning_lab import HOLDOUT_CONFIG, LEARNING_CONFIG, NOW, build_lab, feedback_question

SCOPES = ["personal"]
EXPECTED_PATHS = {
    "/v1/health",
    "/v1/whoami",
    "/v1/memories",
    "/v1/memories/batch",
    "/v1/memories/{node_id}",
    "/v1/memories/{node_id}/update",
    "/v1/memories/{node_id}/archive",
    "/v1/owner/forget",
    "/v1/retrieve",
    "/v1/retrievals/{request_id}",
    "/v1/relevance",
    "/v1/relevance/{feedback_id}",
    "/v1/answer-citations",
    "/v1/answer-citations/{citation_id}",
    "/v1/context/ablation",
    "/v1/context/presence",
    "/v1/learning/evaluate",
    "/v1/holdout/queries",
    "/v1/holdout/queries/retire",
    "/v1/learning/holdout",
    "/v1/profiles",
    "/v1/profiles/active",
    "/v1/profiles/history",
    "/v1/profiles/as-of",
    "/v1/profiles/deactivate",
    "/v1/profiles/rollback",
    "/v1/profiles/{profile_id}",
    "/v1/profiles/{profile_id}/activate",
    "/v1/keys",
    "/v1/keys/{key_id}",
    "/v1/judgments",
}


@dataclass
class World:
    api: ApiServer
    alice: str
    bob: str
    alice_project: str
    alice_node: str
    bob_node: str
    project_node: str


@pytest.fixture(scope="module")
def world(api: ApiServer) -> World:
    client = api.client
    build_lab(client)  # alice/personal: memories, judged retrievals, registered holdout queries
    keys = {
        name: client.create_api_key(owner, scopes=scopes, role="operator").api_key
        for name, owner, scopes in (
            ("alice", "alice", None),
            ("bob", "bob", None),
            ("alice_project", "alice", ["project"]),
        )
    }
    alice_node = client.store_memory("alice", "Alice keeps her bicycle repair receipts in a box")
    bob_node = client.store_memory("bob", "Bob keeps his bicycle repair receipts in a drawer")
    project_node = client.store_memory(
        "alice", {"content": "The project bicycle repair budget is ten", "scope": "project"}
    )
    return World(
        api,
        keys["alice"],
        keys["bob"],
        keys["alice_project"],
        str(alice_node.id),
        str(bob_node.id),
        str(project_node.id),
    )


def _retrieve(http, query="what does the cat repair cost", **body):
    response = http.post("/v1/retrieve", json={"query": query, "reference_time": NOW.isoformat(), **body})
    assert response.status_code == 200, response.text
    return response.json()


def test_openapi_documents_every_route_and_health_needs_no_key(world):
    with world.api.http() as http:
        spec = http.get("/openapi.json").json()
        assert set(spec["paths"]) == EXPECTED_PATHS
        assert "HTTPBearer" in json.dumps(spec["components"]["securitySchemes"])
        assert http.get("/docs").status_code == 200
        assert http.get("/v1/health").json() == {"status": "ok"}
    with world.api.http(world.alice_project) as http:
        me = http.get("/v1/whoami").json()
    assert (me["owner"], me["scopes"]) == ("alice", ["project"])


def test_store_one_and_a_batch_then_read_one_back(world):
    with world.api.http(world.bob) as http:
        one = http.post("/v1/memories", json={"content": "Bob likes oolong", "node_type": "preference"})
        batch = http.post(
            "/v1/memories/batch",
            json={"items": [{"content": "Bob runs on Tuesdays"}, {"content": "Bob's plan", "scope": "project"}]},
        )
        assert one.status_code == batch.status_code == 200, (one.text, batch.text)
        assert one.json()["owner"] == "bob" and [n["owner"] for n in batch.json()["items"]] == ["bob", "bob"]
        got = http.get(f"/v1/memories/{one.json()['id']}").json()
        assert (got["content"], got["node_type"]) == ("Bob likes oolong", "preference")
        # a caller id that exists already is a conflict, and the batch writes nothing
        before = world.api.rows()
        clash = http.post("/v1/memories/batch", json={"items": [{"content": "new"}, {"content": "x", "id": got["id"]}]})
        assert clash.status_code == 409 and clash.json()["error"]["type"] == "idempotency_conflict"
        assert world.api.rows() == before


def test_memories_are_listed_filtered_updated_and_archived(world):
    with world.api.http(world.bob) as http:
        stored = [
            http.post("/v1/memories", json={"content": f"Bob fact {i}", "node_type": kind}).json()
            for i, kind in enumerate(("fact", "preference", "fact"))
        ]
        pages, cursor = [], None
        while True:  # page through everything Bob holds, two at a time
            page = http.get("/v1/memories", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
            pages.append(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        paged = [n["id"] for items in pages for n in items]
        assert len(pages) >= 2 and all(len(items) <= 2 for items in pages)
        assert len(paged) == len(set(paged)) and {n["id"] for n in stored} <= set(paged)
        assert all(n["owner"] == "bob" for items in pages for n in items)
        prefs = http.get("/v1/memories", params={"node_types": ["preference"], "limit": 100}).json()["items"]
        assert stored[1]["id"] in {n["id"] for n in prefs} and {n["node_type"] for n in prefs} == {"preference"}
        assert not {stored[0]["id"], stored[2]["id"]} & {n["id"] for n in prefs}
        future = http.get("/v1/memories", params={"created_from": (utc_now() + timedelta(days=1)).isoformat()})
        assert future.status_code == 200 and future.json()["items"] == []
        naive = http.get("/v1/memories", params={"created_from": "2026-01-01T00:00:00"})
        assert naive.status_code == 422 and "created_from" in naive.text

        updated = http.post(f"/v1/memories/{stored[0]['id']}/update", json={"content": "Bob fact zero, revised"})
        assert updated.status_code == 200, updated.text
        assert updated.json()["content"] == "Bob fact zero, revised" and updated.json()["id"] != stored[0]["id"]
        archived = http.post(f"/v1/memories/{stored[2]['id']}/archive", json={})
        assert archived.status_code == 200 and archived.json()["lifecycle"] == "archived"
        active = {n["id"] for n in http.get("/v1/memories", params={"limit": 100}).json()["items"]}
        assert updated.json()["id"] in active and stored[2]["id"] not in active and stored[0]["id"] not in active
        every = http.get("/v1/memories", params={"limit": 100, "include_inactive": "true"}).json()["items"]
        assert {stored[0]["id"], stored[2]["id"]} <= {n["id"] for n in every}
    # a key limited to "project" lists only that scope and cannot touch a personal memory
    with world.api.http(world.alice_project) as http:
        listed = http.get("/v1/memories", params={"limit": 100}).json()["items"]
        assert {n["scope"] for n in listed} == {"project"}
        before = world.api.rows()
        refused = http.post(f"/v1/memories/{world.alice_node}/archive", json={})
        assert refused.status_code == 404 and world.api.rows() == before


def test_a_memory_is_deleted_and_an_owner_forgotten_over_http(world):
    client = world.api.client
    keys = {
        name: client.create_api_key("dave", role=role, scopes=scopes).api_key
        for name, role, scopes in (
            ("agent", "agent", None),
            ("operator", "operator", None),
            ("limited", "operator", ["project"]),
        )
    }
    kept, doomed = (client.store_memory("dave", f"Dave's note {i}") for i in range(2))
    with world.api.http(keys["agent"]) as http:
        deleted = http.delete(f"/v1/memories/{doomed.id}")
        assert deleted.status_code == 200, deleted.text
        record = deleted.json()
        assert (record["kind"], record["memory_id"], record["versions"][0]["content_sha256"]) == (
            "memory",
            str(doomed.id),
            doomed.content_hash,
        )
        assert "Dave's note" not in deleted.text and record["actor"] != "python"
        assert http.get(f"/v1/memories/{doomed.id}").status_code == 404
        assert http.delete(f"/v1/memories/{doomed.id}").status_code == 404  # gone reads as never there
        refused = http.post("/v1/owner/forget", json={"confirm_owner": "dave"})
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "role_forbidden"
    before = world.api.rows()
    with world.api.http(keys["limited"]) as http:
        assert http.post("/v1/owner/forget", json={"confirm_owner": "dave"}).status_code == 403
    with world.api.http(keys["operator"]) as http:
        wrong = http.post("/v1/owner/forget", json={"confirm_owner": "Dave"})
        assert wrong.status_code == 422 and "confirm_owner" in wrong.text
        assert world.api.rows() == before
        forgotten = http.post("/v1/owner/forget", json={"confirm_owner": "dave"})
        assert forgotten.status_code == 200, forgotten.text
        assert forgotten.json()["rows"]["memory_nodes"] == 1 and forgotten.json()["kind"] == "owner"
        assert http.get("/v1/whoami").status_code == 401  # its keys went with it
    assert client.scan("dave").items == () and kept.owner == "dave"
    assert [r.kind for r in client.deletion_records("dave")] == ["memory", "owner"]


def test_retrieve_takes_every_argument_and_returns_results_context_and_metadata(world):
    with world.api.http(world.alice) as http:
        default = _retrieve(http)
        assert default["context"] and default["results"] and "bundle" not in default
        assert default["metadata"]["ranking_profile_status"] in ("none", "applied")
        receipt = http.get(f"/v1/retrievals/{default['metadata']['request_id']}").json()
        assert receipt["scopes"] == ["agent", "organization", "personal", "project"]  # every configured scope
        full = _retrieve(
            http,
            scopes=["personal", "project"],
            limit=3,
            min_score=0.0,
            token_budget=512,
            time_from=(NOW - timedelta(days=3650)).isoformat(),
            time_to=(NOW + timedelta(days=1)).isoformat(),
            min_fidelity="reference",
            scoring={"semantic": 0.3, "lexical": 0.15},
            packing={"multipath_ordering": "score", "context_format": "compact"},
            ranking_multipliers={"lexical": 2.0, "salience": 0.5},
            include_cross_scope=False,
            retrieval_mode="hybrid",
            epistemic_mode="reliable",
            include_bundle=True,
        )
        meta = full["metadata"]
        assert len(full["results"]) <= 3 and meta["receipt_persisted"]
        assert meta["ranking_profile_status"] == "request_override" and meta["ranking_multipliers"]["lexical"] == 2.0
        assert full["bundle"]["token_budget"] == 512 and full["bundle"]["context_format"] == "compact"
        assert full["bundle"]["min_fidelity"] == "reference"
        saved = http.get(f"/v1/retrievals/{meta['request_id']}").json()
        assert (saved["result_limit"], saved["scoring"]["semantic"], saved["packing"]["multipath_ordering"]) == (
            3,
            0.3,
            "score",
        )
        assert saved["execution"]["parameters"]["epistemic_mode"] == "reliable"
        events = _retrieve(
            http,
            event_time_from=(NOW - timedelta(days=1)).isoformat(),
            event_time_to=NOW.isoformat(),
            include_context=False,
            retrieval_mode="lexical",
        )
        assert events["results"] == [] and "context" not in events  # no lab memory has an event time
        cross = _retrieve(http, scopes=["project"], include_cross_scope=True, query="bicycle repair")
        assert any(r["cross_scope"] for r in cross["results"])


def test_receipt_route_returns_the_saved_receipt_which_replays(world):
    with world.api.http(world.alice) as http:
        result = _retrieve(http, scopes=SCOPES)
        body = http.get(f"/v1/retrievals/{result['metadata']['request_id']}").json()
    receipt = RetrievalReceipt.model_validate(body)
    receipt.validate()
    assert receipt.checksum() == result["metadata"]["receipt_checksum"]
    assert [str(c.node_id) for c in receipt.candidates][: len(result["results"])] == [
        r["node_id"] for r in result["results"]
    ]


def test_relevance_records_are_created_read_paged_and_retried_idempotently(world):
    with world.api.http(world.alice) as http:
        result = _retrieve(http, scopes=SCOPES)
        request_id = result["metadata"]["request_id"]
        labels = {r["node_id"]: i == 0 for i, r in enumerate(result["results"])}
        feedback_id = str(uuid.uuid4())
        body = {"request_id": request_id, "labels": labels, "feedback_id": feedback_id, "method": "explicit_user"}
        first = http.post("/v1/relevance", json=body)
        assert first.status_code == 200, first.text
        again = http.post("/v1/relevance", json=body)
        assert again.json() == first.json()  # an exact retry returns the first record
        other = {**body, "labels": {k: not v for k, v in labels.items()}}
        conflict = http.post("/v1/relevance", json=other)
        assert conflict.status_code == 409 and conflict.json()["error"]["type"] == "idempotency_conflict"
        assert http.get(f"/v1/relevance/{feedback_id}").json() == first.json()
        seen, after = [], None
        while True:
            page = http.get("/v1/relevance", params={"limit": 25, **({"after": after} if after else {})}).json()
            seen += [r["feedback_id"] for r in page["items"]]
            after = page["next_after"]
            if after is None:
                break
        assert feedback_id in seen and seen == sorted(seen) and len(seen) == len(set(seen)) > 25
        unknown = http.post(
            "/v1/relevance", json={**body, "feedback_id": str(uuid.uuid4()), "labels": {world.bob_node: True}}
        )
        assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "labels"


def test_answer_citations_are_created_read_and_paged(world):
    with world.api.http(world.alice) as http:
        result = _retrieve(http, scopes=SCOPES)
        cited = [r["node_id"] for r in result["results"] if r["in_context"] and r["representation"] != "reference"][:1]
        body = {"request_id": result["metadata"]["request_id"], "answer_id": "answer-1", "cited_node_ids": cited}
        created = http.post("/v1/answer-citations", json=body)
        assert created.status_code == 200, created.text
        record = created.json()
        assert (record["method"], record["cited_node_ids"]) == ("model_reported", cited)
        assert http.get(f"/v1/answer-citations/{record['citation_id']}").json() == record
        page = http.get("/v1/answer-citations", params={"limit": 1000}).json()
        assert record["citation_id"] in [c["citation_id"] for c in page["items"]] and page["next_after"] is None
        retry = http.post("/v1/answer-citations", json={**body, "citation_id": record["citation_id"], "answer_id": "b"})
        assert retry.status_code == 409


def test_context_ablation_and_presence_credit(world):
    with world.api.http(world.alice) as http:
        result = _retrieve(http, scopes=SCOPES, include_bundle=True)
        target = next(e["node_id"] for e in result["bundle"]["entries"] if e["has_content"])
        citation = http.post(
            "/v1/answer-citations",
            json={"request_id": result["metadata"]["request_id"], "answer_id": "a-2", "cited_node_ids": [target]},
        ).json()
        ablation = http.post("/v1/context/ablation", json={"bundle": result["bundle"], "node_ids": [target]})
        assert ablation.status_code == 200, ablation.text
        assert ablation.json()["removed_node_ids"] == [target]
        credit = http.post(
            "/v1/context/presence",
            json={
                "ablation": ablation.json(),
                "citation_id": citation["citation_id"],
                "baseline_correct": True,
                "counterfactual_correct": False,
                "protocol": "reader-v1",
            },
        )
        assert credit.status_code == 200, credit.text
        assert (credit.json()["tier"], credit.json()["value"]) == ("load_bearing", 1.0)
        absent = http.post("/v1/context/ablation", json={"bundle": result["bundle"], "node_ids": [world.bob_node]})
        assert absent.status_code == 422 and absent.json()["error"]["field"] == "node_ids"


def test_learning_holdout_and_the_profile_lifecycle(world):
    with world.api.http(world.alice) as http:
        proposal = http.post("/v1/learning/evaluate", json={"scopes": SCOPES, "config": LEARNING_CONFIG})
        assert proposal.status_code == 200, proposal.text
        assert proposal.json()["decision"] == "improved_on_observed_candidates"
        queries = http.get("/v1/holdout/queries", params={"scopes": SCOPES}).json()["items"]
        extra = http.post(
            "/v1/holdout/queries",
            json={
                "scopes": SCOPES,
                "queries": [
                    {
                        "query": "extra question",
                        "relevant_node_ids": [queries[0]["relevant_node_ids"][0]],
                        "reference_time": NOW.isoformat(),
                    }
                ],
            },
        ).json()["items"][0]
        assert http.post(
            "/v1/holdout/queries/retire", json={"scopes": SCOPES, "holdout_ids": [extra["holdout_id"]]}
        ).json() == {"retired": 1}
        assert len(http.get("/v1/holdout/queries", params={"scopes": SCOPES}).json()["items"]) == len(queries)
        holdout = http.post("/v1/learning/holdout", json={"proposal": proposal.json(), "config": HOLDOUT_CONFIG})
        assert holdout.status_code == 200, holdout.text
        assert holdout.json()["decision"] == "improved_full_retrieval"
        created = http.post("/v1/profiles", json={"proposal": proposal.json(), "holdout": holdout.json()})
        assert created.status_code == 200, created.text
        profile_id = created.json()["profile_id"]
        assert http.get(f"/v1/profiles/{profile_id}").json()["active"] is False
        assert profile_id in [p["profile_id"] for p in http.get("/v1/profiles").json()["items"]]

        change = str(uuid.uuid4())
        activated = http.post(f"/v1/profiles/{profile_id}/activate", json={"change_id": change})
        assert activated.status_code == 200, activated.text
        replay = http.post(f"/v1/profiles/{profile_id}/activate", json={"change_id": change}).json()
        assert replay["replayed"] is True and replay["change_id"] == change and replay["superseded_by"] is None
        applied = _retrieve(http, feedback_question("cat"), scopes=SCOPES)["metadata"]
        assert (applied["ranking_profile_status"], applied["ranking_profile_id"]) == ("applied", profile_id)
        assert http.get("/v1/profiles/active", params={"scopes": SCOPES}).json()["profile"]["profile_id"] == profile_id
        at = http.get("/v1/profiles/as-of", params={"scopes": SCOPES, "at": utc_now().isoformat()}).json()
        assert at["state"]["active_profile_id"] == profile_id

        # stale expectations answer 409 with the pointer's current state
        stale = http.post("/v1/profiles/deactivate", json={"scopes": SCOPES, "expected_profile_id": None})
        assert stale.status_code == 409
        assert stale.json()["error"]["type"] == "stale_state"
        assert stale.json()["error"]["current_state"]["active_profile_id"] == profile_id
        noop = http.post(f"/v1/profiles/{profile_id}/activate", json={})
        assert noop.status_code == 409 and noop.json()["error"]["current_state"]["change_id"] == change

        off = http.post("/v1/profiles/deactivate", json={"scopes": SCOPES, "expected_profile_id": profile_id})
        assert off.status_code == 200 and off.json()["active_profile_id"] is None
        assert http.get("/v1/profiles/active", params={"scopes": SCOPES}).json() == {"profile": None}
        back = http.post("/v1/profiles/rollback", json={"scopes": SCOPES, "profile_id": profile_id})
        assert back.status_code == 200 and back.json()["action"] == "rollback"
        base = http.post("/v1/profiles/rollback", json={"scopes": SCOPES, "profile_id": None, "change_id": change})
        assert base.status_code == 409  # a change id reused for another transition
        history = http.get("/v1/profiles/history", params={"scopes": SCOPES, "limit": 2}).json()
        assert [s["action"] for s in history["items"]] == ["rollback", "deactivate"]
        older = http.get("/v1/profiles/history", params={"scopes": SCOPES, "before": history["next_before"]}).json()
        assert [s["action"] for s in older["items"]] == ["activate"] and older["next_before"] is None
        tampered = http.post("/v1/learning/holdout", json={"proposal": {**proposal.json(), "owner": "bob"}})
        assert tampered.status_code == 422  # a report that does not reproduce its checksum does not load
    with world.api.http(world.bob) as bob:
        bobs = bob.post("/v1/learning/evaluate", json={"scopes": SCOPES}).json()  # a genuine report of bob's
    with world.api.http(world.alice) as http:
        for path, body in (
            ("/v1/learning/holdout", {"proposal": bobs}),
            ("/v1/profiles", {"proposal": bobs, "holdout": holdout.json()}),
        ):
            foreign = http.post(path, json=body)
            assert foreign.status_code == 403 and foreign.json()["error"]["field"] == "proposal.owner"


def test_missing_unknown_revoked_and_expired_keys_are_refused_with_401(world):
    client = world.api.client
    revoked = client.create_api_key("alice")
    client.revoke_api_key(revoked.key.key_id)
    soon = client.create_api_key("alice", expires_at=utc_now() + timedelta(seconds=1))
    prefix, key_id, secret = world.alice.split("_", 2)
    import time

    time.sleep(1.1)
    cases = {
        None: "missing",
        "not-a-key": "malformed",
        f"{prefix}_{'0' * 24}_{secret}": "unknown",
        revoked.api_key: "revoked",
        soon.api_key: "expired",
    }
    before = world.api.rows()
    for key, reason in cases.items():
        with world.api.http(key) as http:
            for method, path, body in (("GET", "/v1/whoami", None), ("POST", "/v1/memories", {"content": "x"})):
                response = http.request(method, path, json=body)
                assert response.status_code == 401, (reason, response.text)
                assert response.json()["error"]["reason"] == reason
                assert response.headers["www-authenticate"] == "Bearer"
    assert world.api.rows() == before


def test_a_scope_limited_key_cannot_read_or_write_outside_its_scopes(world):
    before = world.api.rows()
    with world.api.http(world.alice_project) as http:
        for method, path, body in (
            ("POST", "/v1/memories", {"content": "x"}),  # default scope personal
            ("POST", "/v1/memories/batch", {"items": [{"content": "x", "scope": "project"}, {"content": "y"}]}),
            ("POST", "/v1/retrieve", {"query": "cat", "scopes": ["personal"]}),
            ("POST", "/v1/retrieve", {"query": "cat", "include_cross_scope": True}),
            ("POST", "/v1/learning/evaluate", {"scopes": ["personal"]}),
            ("GET", "/v1/holdout/queries?scopes=personal", None),
            ("GET", "/v1/profiles/active?scopes=personal", None),
            ("POST", "/v1/profiles/deactivate", {"scopes": ["personal", "project"]}),
        ):
            response = http.request(method, path, json=body)
            assert response.status_code == 403, (path, response.text)
            assert response.json()["error"]["type"] == "scope_forbidden" and response.json()["error"]["field"]
        assert world.api.rows() == before
        # reads by id outside the key's scopes are not found, like foreign ids
        with world.api.http(world.alice) as full:
            personal = _retrieve(full, scopes=SCOPES)
            node = personal["results"][0]["node_id"]
            feedback = full.get("/v1/relevance", params={"limit": 1}).json()["items"][0]["feedback_id"]
        for path in (
            f"/v1/memories/{node}",
            f"/v1/retrievals/{personal['metadata']['request_id']}",
            f"/v1/relevance/{feedback}",
        ):
            assert http.get(path).status_code == 404
        labels = {node: True}
        assert (
            http.post(
                "/v1/relevance", json={"request_id": personal["metadata"]["request_id"], "labels": labels}
            ).status_code
            == 404
        )
        assert http.get("/v1/relevance").json()["items"] == []
        # inside its scopes it works, and scopes default to the key's
        own = _retrieve(http, query="bicycle repair budget")
        assert [r["node_id"] for r in own["results"]] == [world.project_node]
        assert http.get(f"/v1/memories/{world.project_node}").status_code == 200
        assert http.post("/v1/memories", json={"content": "Project note", "scope": "project"}).status_code == 200


def _ids_of(http, owner_node: str) -> dict[str, str]:
    """One id of every kind an owner has: memory, receipt, relevance, citation, profile, holdout."""
    result = _retrieve(http, "bicycle repair receipts drawer cat", include_bundle=True)
    request_id = result["metadata"]["request_id"]
    in_context = [r["node_id"] for r in result["results"] if r["in_context"] and r["representation"] != "reference"]
    feedback = http.post(
        "/v1/relevance", json={"request_id": request_id, "labels": {result["results"][0]["node_id"]: True}}
    ).json()
    citation = http.post(
        "/v1/answer-citations", json={"request_id": request_id, "answer_id": "p", "cited_node_ids": in_context[:1]}
    ).json()
    holdout = http.post(
        "/v1/holdout/queries",
        json={
            "scopes": ["personal"],
            "queries": [
                {"query": f"probe {uuid.uuid4()}", "relevant_node_ids": [owner_node], "reference_time": NOW.isoformat()}
            ],
        },
    ).json()["items"][0]
    return {
        "node": owner_node,
        "request": request_id,
        "feedback": feedback["feedback_id"],
        "citation": citation["citation_id"],
        "holdout": holdout["holdout_id"],
    }


def _probes(ids: dict[str, str], profile_id: str) -> list[tuple[str, str, dict | None]]:
    node, request, feedback, citation, holdout = (
        ids[k] for k in ("node", "request", "feedback", "citation", "holdout")
    )
    return [
        ("GET", f"/v1/memories/{node}", None),
        ("POST", f"/v1/memories/{node}/update", {"content": "overwritten"}),
        ("POST", f"/v1/memories/{node}/archive", {}),
        ("DELETE", f"/v1/memories/{node}", None),
        ("GET", f"/v1/retrievals/{request}", None),
        ("POST", "/v1/relevance", {"request_id": request, "labels": {node: True}}),
        ("GET", f"/v1/relevance/{feedback}", None),
        ("POST", "/v1/answer-citations", {"request_id": request, "answer_id": "x", "cited_node_ids": []}),
        ("GET", f"/v1/answer-citations/{citation}", None),
        ("GET", f"/v1/profiles/{profile_id}", None),
        ("POST", f"/v1/profiles/{profile_id}/activate", {}),
        ("POST", "/v1/profiles/rollback", {"scopes": ["personal"], "profile_id": profile_id}),
        ("POST", "/v1/holdout/queries/retire", {"scopes": ["personal"], "holdout_ids": [holdout]}),
    ]


def test_randomized_isolation_probes_between_two_owners_read_nothing_foreign(world):
    rng = random.Random(18)
    with world.api.http(world.alice) as alice, world.api.http(world.bob) as bob:
        profiles = alice.get("/v1/profiles").json()["items"]
        ids = {"alice": _ids_of(alice, world.alice_node), "bob": _ids_of(bob, world.bob_node)}
        profile = {"alice": profiles[0]["profile_id"] if profiles else str(uuid.uuid4()), "bob": str(uuid.uuid4())}
        secrets = {owner: set(ids[owner].values()) for owner in ids}
        before = world.api.rows()
        probes = []
        for prober, victim, http in (("bob", "alice", bob), ("alice", "bob", alice)):
            for probe in _probes(ids[victim], profile[victim]):
                probes.append((prober, victim, http, probe))
            missing = {k: str(uuid.uuid4()) for k in ids[victim]}  # never-used ids must read the same
            for probe in _probes(missing, str(uuid.uuid4())):
                probes.append((prober, "nobody", http, probe))
        rng.shuffle(probes)
        bodies = {}
        for prober, victim, http, (method, path, body) in probes * 2:
            response = http.request(method, path, json=body)
            assert response.status_code == 404, (prober, path, response.text)
            error = response.json()["error"]
            assert error["type"] == "not_found" and set(error) == {"type", "resource", "message"}
            if victim != "nobody":
                assert not any(s in response.text for s in secrets[victim] - set(path.split("/")))
            route = path.rsplit("/", 1)[0] if method == "GET" else path
            bodies.setdefault((prober, method, route.split("{")[0]), set()).add(response.text)
        assert world.api.rows() == before  # no probe wrote anything
        # listings of one owner never show the other's records
        for http, other in ((alice, "bob"), (bob, "alice")):
            for path in ("/v1/relevance", "/v1/answer-citations", "/v1/profiles"):
                listed = http.get(path, params={"limit": 1000}).text
                assert not any(s in listed for s in secrets[other])


BAD_INPUT = [
    # (what, method, path, body, status, field)
    ("wrong type: limit as text", "POST", "/v1/retrieve", {"query": "cat", "limit": "5"}, 422, "limit"),
    (
        "wrong type: flag as number",
        "POST",
        "/v1/retrieve",
        {"query": "cat", "include_cross_scope": 1},
        422,
        "include_cross_scope",
    ),
    (
        "wrong type: labels not booleans",
        "POST",
        "/v1/relevance",
        {"request_id": str(uuid.uuid4()), "labels": {str(uuid.uuid4()): "yes"}},
        422,
        "labels",
    ),
    ("wrong type: content not text", "POST", "/v1/memories", {"content": 42}, 422, "content"),
    (
        "NaN multiplier",
        "POST",
        "/v1/retrieve",
        '{"query": "cat", "ranking_multipliers": {"lexical": NaN}}',
        422,
        "ranking_multipliers.lexical",
    ),
    ("NaN salience", "POST", "/v1/memories", '{"content": "x", "salience": NaN}', 422, "salience"),
    ("NaN in metadata", "POST", "/v1/memories", '{"content": "x", "metadata": {"a": NaN}}', 422, "metadata"),
    (
        "naive reference_time",
        "POST",
        "/v1/retrieve",
        {"query": "cat", "reference_time": "2024-06-01T00:00:00"},
        422,
        "reference_time",
    ),
    (
        "naive event_time",
        "POST",
        "/v1/memories",
        {"content": "x", "event_time": "2024-06-01T00:00:00"},
        422,
        "event_time",
    ),
    ("out of range: limit", "POST", "/v1/retrieve", {"query": "cat", "limit": 201}, 422, "limit"),
    (
        "out of range: multiplier",
        "POST",
        "/v1/retrieve",
        {"query": "cat", "ranking_multipliers": {"graph": 9}},
        422,
        "ranking_multipliers.graph",
    ),
    ("out of range: salience", "POST", "/v1/memories", {"content": "x", "salience": 1.5}, 422, "salience"),
    ("out of range: page", "GET", "/v1/relevance?limit=1001", None, 422, "limit"),
    (
        "out of range: max_records",
        "POST",
        "/v1/learning/evaluate",
        {"scopes": ["personal"], "max_records": 0},
        422,
        "max_records",
    ),
    ("unknown scope", "POST", "/v1/retrieve", {"query": "cat", "scopes": ["galaxy"]}, 422, "scopes"),
    (
        "window upside down",
        "POST",
        "/v1/retrieve",
        {"query": "cat", "time_from": "2024-06-02T00:00:00Z", "time_to": "2024-06-01T00:00:00Z"},
        422,
        "time_to",
    ),
    ("unknown field", "POST", "/v1/memories", {"content": "x", "owner": "mallory"}, 422, "owner"),
    (
        "unknown scoring field",
        "POST",
        "/v1/retrieve",
        {"query": "cat", "scoring": {"colour": 1}},
        422,
        "scoring.colour",
    ),
    ("unknown query parameter", "GET", "/v1/profiles?owner=bob", None, 422, "owner"),
    ("malformed id", "GET", "/v1/retrievals/not-a-uuid", None, 422, "request_id"),
    (
        "weights not summing to one",
        "POST",
        "/v1/retrieve",
        {"query": "cat", "scoring": {"semantic": 0.9}},
        422,
        "scoring",
    ),
    ("malformed JSON", "POST", "/v1/memories", '{"content": ', 422, "body"),
    ("oversized body", "POST", "/v1/memories/batch", {"items": [{"content": "x" * 60_000}] * 5}, 413, "body"),
]


@pytest.mark.parametrize("what, method, path, body, status, field", BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
def test_bad_input_names_the_field_and_writes_nothing(world, what, method, path, body, status, field):
    before = world.api.rows()
    with world.api.http(world.alice) as http:
        if isinstance(body, str):
            response = http.request(method, path, content=body, headers={"content-type": "application/json"})
        else:
            response = http.request(method, path, json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["field"] == field or error["field"].startswith(field), error
    assert field in error["message"]
    if status == 413:
        assert error["bound"] == {"max_bytes": SMALL_BODY_LIMIT}
    if what.startswith("out of range") and status == 422 and method == "POST" and field != "max_records":
        assert error.get("bound") or any(c.isdigit() for c in error["message"])
    assert world.api.rows() == before


def test_a_streamed_body_over_the_limit_is_refused_too(world):
    before = world.api.rows()
    chunks = (b'{"items": [' + b",".join([b'{"content": "' + b"y" * 50_000 + b'"}'] * 6) + b"]}",)
    with world.api.http(world.alice) as http:
        response = http.post(
            "/v1/memories/batch", content=iter(chunks), headers={"content-type": "application/json"}
        )  # an iterator: sent chunked, no Content-Length
    assert response.status_code == 413 and response.json()["error"]["bound"] == {"max_bytes": SMALL_BODY_LIMIT}
    assert world.api.rows() == before


def test_mcp_streamable_http_binds_the_bearer_key(world):
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def call(key):
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with streamable_http_client(f"{world.api.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    me = await session.call_tool("memory_whoami", {})
                    found = await session.call_tool("memory_get", {"node_id": world.bob_node})
                    return me, found

    me, found = anyio.run(call, world.alice)
    assert not me.is_error and me.structured_content["owner"] == "alice"
    assert found.is_error and found.structured_content["error"]["status"] == 404  # bob's memory
    me, _ = anyio.run(call, world.bob)
    assert me.structured_content["owner"] == "bob"
    refused, _ = anyio.run(call, None)
    assert refused.is_error and refused.structured_content["error"]["status"] == 401
