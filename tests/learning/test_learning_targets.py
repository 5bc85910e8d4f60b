"""Learning targets and stage evidence read through prme_core (what the Dagster sensor, schedule
and IO manager call): feedback discovery, the feedback fingerprint and stored artifacts."""

from datetime import UTC, datetime

from prme_core.learning.discovery import feedback_fingerprint, feedback_scope_sets_since
from prme_core.learning.evidence import latest_artifact, record_artifact

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def _judge(client, owner, scopes):
    """One retrieval of ``owner`` over ``scopes`` with one relevance record on it."""
    response = client.retrieve("Miso cat", owner=owner, scopes=scopes, reference_time=NOW)
    client.record_relevance(
        response.metadata.request_id, {response.results[0].node_id: True}, owner=owner, method="explicit_user"
    )


def test_the_feedback_fingerprint_changes_when_the_owner_adds_relevance_feedback(client):
    client.store_batch("alice", ["Alice: my cat is called Miso", "Alice: Miso eats salmon"])
    client.store_batch("bob", ["Bob: my cat is called Miso too"])
    empty = feedback_fingerprint(client.store, "alice")
    _judge(client, "alice", ["personal"])
    first = feedback_fingerprint(client.store, "alice")
    _judge(client, "bob", ["personal"])
    assert empty == "0:0" and first.startswith("1:") and feedback_fingerprint(client.store, "alice") == first
    _judge(client, "alice", ["personal"])
    assert feedback_fingerprint(client.store, "alice") not in (empty, first)


def test_feedback_scope_sets_since_names_each_owner_and_exact_scope_set_after_the_cursor(client):
    client.store_batch("alice", ["Alice: my cat is called Miso", "Alice: Miso eats salmon"])
    client.store_batch("bob", ["Bob: my cat is called Miso too"])
    _judge(client, "alice", ["personal"])
    _judge(client, "bob", ["project", "personal"])
    found = feedback_scope_sets_since(client.store, 0, limit=10)
    assert [(owner, scopes) for owner, scopes, _ in found] == [
        ("alice", ("personal",)),
        ("bob", ("personal", "project")),
    ]
    assert feedback_scope_sets_since(client.store, found[-1][2], limit=10) == []


def test_the_newest_artifact_of_a_target_loads_and_a_retried_run_keeps_its_first_record(open_store_at):
    store = open_store_at()
    target = "ranking_proposal@alice::personal"
    assert latest_artifact(store, "alice", target) is None
    first = record_artifact(
        store, owner="alice", scope_key="alice::personal", target=target, run_id="r1", body={"run_id": "r1", "value": 1}
    )
    retry = record_artifact(
        store, owner="alice", scope_key="alice::personal", target=target, run_id="r1", body={"run_id": "r1", "value": 1}
    )
    record_artifact(
        store, owner="alice", scope_key="alice::personal", target=target, run_id="r2", body={"run_id": "r2", "value": 2}
    )
    assert retry == first
    assert latest_artifact(store, "alice", target) == {"run_id": "r2", "value": 2}
    assert latest_artifact(store, "bob", target) is None
