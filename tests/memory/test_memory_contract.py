"""Memory API contract on both backends: isolation, validation, atomic batches, history."""

import asyncio
import hashlib
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from prme_core import MemoryClient, MemoryEngine
from prme_core.errors import IdempotencyConflict, InvalidInput, NodeNotFound
from prme_core.memory.models import MAX_CONTENT_BYTES

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _count(client, owner="alice", **kw):
    return sum(1 for _ in client.iterate(owner, include_inactive=True, **kw))


def test_stored_memory_reads_back_with_its_fields(client):
    node = client.store_memory(
        "alice",
        {
            "content": "Alice prefers green tea",
            "node_type": "preference",
            "scope": "project",
            "session_id": "s1",
            "event_time": T0,
            "salience": 0.9,
            "confidence": 0.6,
            "epistemic_type": "observed",
            "metadata": {"source": "chat"},
        },
    )
    got = client.get("alice", node.id)
    assert got == node
    assert got.content_hash == hashlib.sha256(b"Alice prefers green tea").hexdigest()
    assert got.event_time == T0 and got.version == 1 and got.lifecycle.value == "stable"


def test_a_second_owner_sees_nothing_of_the_first(client):
    node = client.store_memory("alice", "secret plan")
    other = client.store_memory("alice", "another note")
    client.link("alice", node.id, other.id, "relates_to")
    with pytest.raises(NodeNotFound):
        client.get("bob", node.id)
    with pytest.raises(NodeNotFound):
        client.history("bob", node.id)
    with pytest.raises(NodeNotFound):
        client.edges("bob", node.id)
    assert client.scan("bob").items == ()
    assert list(client.iterate("bob", include_inactive=True)) == []


@pytest.mark.parametrize("owner_op", ["link", "supersede", "archive"])
def test_a_foreign_id_reads_as_not_found_for_every_write(client, owner_op):
    node = client.store_memory("alice", "alice's memory")
    mine = client.store_memory("bob", "bob's memory")
    with pytest.raises(NodeNotFound):
        if owner_op == "link":
            client.link("bob", mine.id, node.id)
        elif owner_op == "supersede":
            client.supersede("bob", node.id, "hijack")
        else:
            client.archive("bob", node.id)
    assert client.history("alice", node.id) == [node]
    assert _count(client, "bob") == 1


BAD_ITEMS = [
    ("blank content", {"content": "   "}, "content"),
    ("unknown scope", {"content": "x", "scope": "galaxy"}, "scope"),
    ("unknown node type", {"content": "x", "node_type": "rumour"}, "node_type"),
    ("naive event time", {"content": "x", "event_time": datetime(2024, 1, 1)}, "event_time"),
    ("salience above 1", {"content": "x", "salience": 1.5}, "salience"),
    ("confidence below 0", {"content": "x", "confidence": -0.1}, "confidence"),
    ("oversized content", {"content": "x" * (MAX_CONTENT_BYTES + 1)}, "65536"),
    ("inverted validity", {"content": "x", "valid_from": T0, "valid_to": T0}, "valid_to"),
    ("archived at birth", {"content": "x", "lifecycle": "archived"}, "lifecycle"),
    ("nan salience", {"content": "x", "salience": float("nan")}, "salience"),
]


@pytest.mark.parametrize("label,item,needle", BAD_ITEMS, ids=[b[0] for b in BAD_ITEMS])
def test_bad_input_raises_a_typed_error_and_writes_nothing(client, label, item, needle):
    with pytest.raises(InvalidInput, match=needle) as info:
        client.store_batch("alice", [{"content": "fine"}, item])
    assert info.value.field.startswith("items[1]")
    assert _count(client) == 0


@pytest.mark.parametrize("owner", ["", "   ", " padded", "tab\tbed", None, 7])
def test_blank_or_malformed_owner_is_rejected(client, owner):
    with pytest.raises(InvalidInput, match="owner"):
        client.store_memory(owner, "x")


def test_batch_store_is_all_or_nothing_when_the_database_refuses(client):
    taken = client.store_memory("alice", {"content": "first", "id": uuid4()})
    batch = [{"content": f"m{i}"} for i in range(50)] + [{"content": "dup", "id": taken.id}]
    with pytest.raises(IdempotencyConflict, match=str(taken.id)):
        client.store_batch("alice", batch)
    assert _count(client) == 1


def test_duplicate_ids_inside_one_batch_are_rejected(client):
    same = uuid4()
    with pytest.raises(InvalidInput, match="twice"):
        client.store_batch("alice", [{"content": "a", "id": same}, {"content": "b", "id": same}])
    assert _count(client) == 0


def test_large_batch_stores_every_node(client):
    nodes = client.store_batch("alice", [{"content": f"memory {i}", "session_id": f"s{i % 7}"} for i in range(1200)])
    assert len({n.id for n in nodes}) == 1200
    assert _count(client) == 1200


def test_history_survives_supersede_and_archive(client):
    old = client.store_memory("alice", {"content": "Alice lives in Paris", "node_type": "fact"})
    new = client.supersede("alice", old.id, "Alice lives in Lisbon")
    assert new.node_type.value == "fact" and new.version == 1
    history = client.history("alice", old.id)
    assert [(v.version, v.lifecycle.value) for v in history] == [(1, "stable"), (2, "superseded")]
    assert history[0] == old and history[1].superseded_by == new.id
    edges = client.edges("alice", old.id)
    assert [(e.edge_type.value, e.source_id, e.target_id) for e in edges] == [("supersedes", new.id, old.id)]
    archived = client.archive("alice", new.id)
    assert archived.version == 2 and archived.lifecycle.value == "archived"
    assert [v.content for v in client.history("alice", new.id)] == ["Alice lives in Lisbon"] * 2
    assert client.scan("alice").items == ()
    assert _count(client) == 2
    with pytest.raises(InvalidInput, match="already archived"):
        client.archive("alice", new.id)
    with pytest.raises(InvalidInput, match="only active"):
        client.supersede("alice", old.id, "again")


def test_scan_pages_are_bounded_and_resume_from_the_cursor(client):
    client.store_batch("alice", [{"content": f"m{i}"} for i in range(25)])
    seen, cursor = [], None
    while True:
        page = client.scan("alice", limit=10, cursor=cursor)
        assert len(page.items) <= 10
        seen.extend(n.content for n in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"m{i}" for i in range(25)]
    for bad in (0, 1001, True, "10"):
        with pytest.raises(InvalidInput, match="limit"):
            client.scan("alice", limit=bad)
    with pytest.raises(InvalidInput, match="cursor"):
        client.scan("alice", cursor="not-a-cursor")


def test_scan_filters_by_scope(client):
    client.store_batch("alice", [{"content": "p", "scope": "personal"}, {"content": "q", "scope": "project"}])
    assert [n.content for n in client.scan("alice", scopes=["project"]).items] == ["q"]
    with pytest.raises(InvalidInput, match="unknown scope"):
        client.scan("alice", scopes=["galaxy"])


def test_link_rejects_self_loops_and_unknown_types(client):
    a = client.store_memory("alice", "a")
    b = client.store_memory("alice", "b")
    with pytest.raises(InvalidInput, match="different"):
        client.link("alice", a.id, a.id)
    with pytest.raises(InvalidInput, match="edge_type"):
        client.link("alice", a.id, b.id, "loves")
    assert client.edges("alice", a.id) == []


def test_data_survives_close_and_reopen(store_url):
    with MemoryClient(store_url) as first:
        node = first.store_memory("alice", "durable")
        first.archive("alice", node.id)
        edge_target = first.store_memory("alice", "other")
        first.link("alice", node.id, edge_target.id)
    with MemoryClient(store_url) as second:
        assert [v.version for v in second.history("alice", node.id)] == [1, 2]
        assert len(second.edges("alice", node.id)) == 1


def test_async_engine_shares_the_contract(store_url):
    async def scenario():
        async with MemoryEngine(store_url) as engine:
            node = await engine.store_memory("alice", "async memory")
            assert (await engine.get("alice", node.id)).content == "async memory"
            with pytest.raises(NodeNotFound):
                await engine.get("bob", node.id)
            many = await asyncio.gather(*(engine.store_memory("alice", f"m{i}") for i in range(8)))
            assert len({n.id for n in many}) == 8
            return (await engine.scan("alice", limit=100)).items

    assert len(asyncio.run(scenario())) == 9
