"""Registered holdout queries, the memory-artifact digest and run_holdout (both backends)."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from prme_core import MemoryClient
from prme_core.errors import (
    HoldoutIntegrityError,
    HoldoutQueryNotFound,
    IdempotencyConflict,
    InvalidInput,
    MemoryChangedDuringHoldout,
)
from prme_core.learning import holdout
from prme_core.learning.holdout import (
    OP_HOLDOUT,
    OP_RETIRED,
    list_holdout_queries,
    memory_artifact_digest,
    register_holdout_queries,
    retire_holdout_queries,
)
from prme_core.learning.split import query_digest
from prme_core.receipts.store import get_receipts
from prme_core.retrieval.multipliers import UNITY
from tests.learning_lab import SUBJECTS, store_repair_memories

NOW = datetime(2024, 6, 1, tzinfo=UTC)
SCOPES = ["agent", "organization", "personal", "project"]
CANDIDATE = {"lexical": 4.0}
PROPOSAL = "ab" * 32
TOPICS = list(SUBJECTS[:20])


@pytest.fixture
def relevant(client):
    return store_repair_memories(client, TOPICS)


def _spec(topic, relevant, **kw):
    return {
        "query": f"how much is the {topic} repair",
        "relevant_node_ids": [relevant[topic]],
        "reference_time": NOW,
        **kw,
    }


def _ops(store, op_type, owner="alice"):
    with store.transaction() as tx:
        return len(tx.list_operations(owner, op_type, limit=1000))


# --- registration -----------------------------------------------------------------------------------


def test_registration_returns_records_with_derived_identities(client, relevant):
    [record] = register_holdout_queries(client.store, "alice", SCOPES, [_spec("cat", relevant, group="cats")])
    assert record.scope_key == "agent+organization+personal+project" and record.scopes == tuple(SCOPES)
    assert record.query_digest == query_digest("How much is the CAT repair ")
    assert record.relevant_node_ids == (relevant["cat"],) and record.limit == 20
    assert list_holdout_queries(client.store, "alice", SCOPES) == [record]


@pytest.mark.parametrize(
    "broken",
    [
        {"relevant_node_ids": [uuid.uuid4()]},
        {"query": "   "},
        {"reference_time": datetime(2024, 6, 1)},
        {"relevant_node_ids": []},
        {"limit": 0},
        {"time_from": NOW, "time_to": NOW - timedelta(days=1)},
    ],
    ids=["unknown-node", "blank-query", "naive-clock", "empty-relevant-set", "zero-limit", "inverted-window"],
)
def test_invalid_registration_writes_nothing(client, relevant, broken):
    good = _spec("cat", relevant)
    with pytest.raises(InvalidInput, match=r"queries\[1\]"):
        register_holdout_queries(client.store, "alice", SCOPES, [good, _spec("dog", relevant, **broken)])
    assert _ops(client.store, OP_HOLDOUT) == 0


def test_registration_naming_another_owners_memory_writes_nothing(client, relevant):
    [foreign] = client.store_batch("bob", ["Bob: my dog repair was cheap"])
    with pytest.raises(InvalidInput, match=f"{foreign.id} is not a memory of owner 'alice'"):
        register_holdout_queries(
            client.store,
            "alice",
            SCOPES,
            [_spec("cat", relevant), _spec("dog", relevant, relevant_node_ids=[foreign.id])],
        )
    assert _ops(client.store, OP_HOLDOUT) == 0 and _ops(client.store, OP_HOLDOUT, "bob") == 0


@pytest.mark.parametrize(
    "owner, scopes, queries",
    [
        ("  ", SCOPES, None),
        ("alice", [], None),
        ("alice", ["Not A Scope"], None),
        ("alice", SCOPES, []),
    ],
)
def test_registration_with_invalid_owner_scopes_or_no_queries_raises(client, relevant, owner, scopes, queries):
    with pytest.raises(InvalidInput):
        register_holdout_queries(client.store, owner, scopes, [_spec("cat", relevant)] if queries is None else queries)


def test_re_registering_the_same_query_returns_the_first_record(client, relevant):
    [first] = register_holdout_queries(client.store, "alice", SCOPES, [_spec("cat", relevant)])
    [again] = register_holdout_queries(
        client.store, "alice", list(reversed(SCOPES)), [_spec("cat", relevant, query="  HOW much is the cat   repair")]
    )
    assert again == first and again.registered_at == first.registered_at
    assert _ops(client.store, OP_HOLDOUT) == 1


def test_re_registering_a_query_with_another_relevant_set_raises_and_keeps_the_first(client, relevant):
    [first] = register_holdout_queries(client.store, "alice", SCOPES, [_spec("cat", relevant)])
    with pytest.raises(IdempotencyConflict, match="different judgment"):
        register_holdout_queries(
            client.store,
            "alice",
            SCOPES,
            [_spec("dog", relevant), _spec("cat", relevant, relevant_node_ids=[relevant["dog"]])],
        )
    assert list_holdout_queries(client.store, "alice", SCOPES) == [first]


def test_same_query_at_another_clock_is_another_holdout_query(client, relevant):
    records = register_holdout_queries(
        client.store,
        "alice",
        SCOPES,
        [_spec("cat", relevant), _spec("cat", relevant, reference_time=NOW + timedelta(days=1))],
    )
    assert records[0].holdout_id != records[1].holdout_id and records[0].group_id == records[1].group_id


def test_holdout_queries_are_listed_per_exact_scope_set_in_id_order(client, relevant):
    records = register_holdout_queries(client.store, "alice", SCOPES, [_spec(t, relevant) for t in TOPICS[:6]])
    register_holdout_queries(client.store, "alice", ["personal"], [_spec("cat", relevant)])
    listed = list_holdout_queries(client.store, "alice", SCOPES)
    assert listed == sorted(records, key=lambda r: r.holdout_id)
    assert len(list_holdout_queries(client.store, "alice", ["personal"])) == 1
    assert list_holdout_queries(client.store, "alice", ["personal", "project"]) == []
    assert list_holdout_queries(client.store, "bob", SCOPES) == []


def test_listing_reads_every_page(client, relevant, monkeypatch):
    records = register_holdout_queries(client.store, "alice", SCOPES, [_spec(t, relevant) for t in TOPICS[:7]])
    retire_holdout_queries(client.store, "alice", SCOPES, [r.holdout_id for r in records[:3]])
    monkeypatch.setattr(holdout, "PAGE_SIZE", 2)
    assert list_holdout_queries(client.store, "alice", SCOPES) == sorted(records[3:], key=lambda r: r.holdout_id)


def test_retired_queries_leave_the_active_list_and_stay_retired(client, relevant):
    records = register_holdout_queries(client.store, "alice", SCOPES, [_spec(t, relevant) for t in TOPICS[:3]])
    ids = [records[0].holdout_id, str(records[1].holdout_id)]
    assert retire_holdout_queries(client.store, "alice", SCOPES, ids) == 2
    assert retire_holdout_queries(client.store, "alice", SCOPES, [records[0].holdout_id]) == 0
    assert [r.holdout_id for r in list_holdout_queries(client.store, "alice", SCOPES)] == [records[2].holdout_id]
    register_holdout_queries(client.store, "alice", SCOPES, [_spec(TOPICS[0], relevant)])
    assert len(list_holdout_queries(client.store, "alice", SCOPES)) == 1
    assert _ops(client.store, OP_HOLDOUT) == 3 and _ops(client.store, OP_RETIRED) == 2


@pytest.mark.parametrize("scopes", [SCOPES, ["personal"]])
def test_retiring_an_unknown_or_other_scope_id_raises_and_writes_nothing(client, relevant, scopes):
    [record] = register_holdout_queries(client.store, "alice", SCOPES, [_spec("cat", relevant)])
    ids = [record.holdout_id, uuid.uuid4()] if scopes == SCOPES else [record.holdout_id]
    with pytest.raises(HoldoutQueryNotFound):
        retire_holdout_queries(client.store, "alice", scopes, ids)
    assert _ops(client.store, OP_RETIRED) == 0


def test_registered_queries_survive_restart(open_store_at):
    store = open_store_at()
    relevant = store_repair_memories(MemoryClient(store=store), TOPICS)
    records = register_holdout_queries(store, "alice", SCOPES, [_spec(t, relevant) for t in TOPICS[:4]])
    retire_holdout_queries(store, "alice", SCOPES, [records[0].holdout_id])
    store.close()
    reopened = open_store_at()
    assert list_holdout_queries(reopened, "alice", SCOPES) == sorted(records[1:], key=lambda r: r.holdout_id)


# --- the memory artifact ------------------------------------------------------------------------------


def test_memory_digest_changes_with_each_write_to_the_owners_memory(client, relevant):
    seen = {memory_artifact_digest(client.store, "alice")}
    [node] = client.store_batch("alice", ["Alice: a new memory"])
    seen.add(memory_artifact_digest(client.store, "alice"))
    client.link("alice", node.id, relevant["cat"])
    seen.add(memory_artifact_digest(client.store, "alice"))
    client.archive("alice", node.id)
    seen.add(memory_artifact_digest(client.store, "alice"))
    assert len(seen) == 4


def test_memory_digest_does_not_depend_on_the_page_size(client, relevant, monkeypatch):
    client.link("alice", relevant["cat"], relevant["dog"])
    client.link("alice", relevant["dog"], relevant["tea"])
    client.archive("alice", relevant["cat"])
    whole = memory_artifact_digest(client.store, "alice")
    monkeypatch.setattr(holdout, "_DIGEST_PAGE", 1)
    assert memory_artifact_digest(client.store, "alice") == whole


def test_memory_digest_ignores_other_owners_retrievals_and_holdout_records(client, relevant):
    before = memory_artifact_digest(client.store, "alice")
    client.store_batch("bob", ["Bob: something else entirely"])
    client.retrieve("cat repair", owner="alice", reference_time=NOW)
    register_holdout_queries(client.store, "alice", SCOPES, [_spec("cat", relevant)])
    assert memory_artifact_digest(client.store, "alice") == before
    assert memory_artifact_digest(client.store, "bob") != before


# --- running the holdout ----------------------------------------------------------------------------


@pytest.fixture
def registered(client, relevant):
    return register_holdout_queries(client.store, "alice", SCOPES, [_spec(t, relevant) for t in TOPICS])


def test_run_holdout_produces_paired_persisted_receipts_that_evaluate_end_to_end(client, registered):
    run = client.run_holdout("alice", SCOPES, candidate_multipliers=CANDIDATE)
    assert run.query_count == 20 and run.holdout_ids == tuple(sorted(q.holdout_id for q in registered))
    assert run.memory_artifact_sha256 == memory_artifact_digest(client.store, "alice")
    stored = get_receipts(client.store, "alice", list(run.receipts))
    assert {k: v[1] for k, v in stored.items()} == {k: v[1] for k, v in run.receipts.items()}
    first = run.receipts[run.trials[0].baseline_request_id][0]
    assert first.execution.parameters["ranking_multipliers"] == UNITY.model_dump()
    report = run.evaluate(PROPOSAL)
    assert report.decision == "improved_full_retrieval" and report.memory_artifact_sha256 == run.memory_artifact_sha256
    assert len(report.receipt_checksums) == 40 and report.coverage.query_groups == 20


def test_a_reloaded_run_evaluates_with_receipts_read_from_the_store(client, registered):
    run = client.run_holdout("alice", SCOPES, candidate_multipliers=CANDIDATE, limit_override=5)
    reloaded = type(run).model_validate_json(run.model_dump_json())
    assert "receipts" not in run.model_dump() and reloaded.receipts == {}
    receipts = get_receipts(client.store, "alice", list(run.receipts))
    assert all(r.result_limit == 5 for r, _ in receipts.values())
    assert reloaded.evaluate(PROPOSAL, receipts=receipts) == run.evaluate(PROPOSAL)


def test_a_memory_write_during_run_holdout_raises(client, registered, monkeypatch):
    original, calls = MemoryClient.retrieve, []

    def retrieve_and_write_once(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 7:
            self.store_memory("alice", "Alice: written while the holdout ran")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MemoryClient, "retrieve", retrieve_and_write_once)
    with pytest.raises(MemoryChangedDuringHoldout, match="pause writes"):
        client.run_holdout("alice", SCOPES, candidate_multipliers=CANDIDATE)


def test_holdout_queries_among_the_proposals_queries_are_rejected(client, registered):
    excluded = {registered[0].query_digest, registered[5].query_digest, "cd" * 32}
    with pytest.raises(HoldoutIntegrityError, match="2 of 20 active holdout queries.*retire them"):
        client.run_holdout("alice", SCOPES, candidate_multipliers=CANDIDATE, excluded_query_digests=excluded)


def test_run_holdout_without_registered_queries_asks_to_register_them(client, relevant):
    with pytest.raises(HoldoutQueryNotFound, match="register_holdout_queries"):
        client.run_holdout("alice", SCOPES, candidate_multipliers=CANDIDATE)


def test_run_holdout_rejects_malformed_excluded_digests(client, registered):
    with pytest.raises(InvalidInput, match="excluded_query_digests"):
        client.run_holdout("alice", SCOPES, candidate_multipliers=CANDIDATE, excluded_query_digests=["not-a-digest"])
