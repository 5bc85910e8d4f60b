"""Profile resolution remembers a verified pointer change (issue 28, faster retrieve): the
remembered change is used only while the head still names it and its log row is unchanged, so
every pointer change is seen at once and a tampered pointer still fails closed."""

from __future__ import annotations

import json
import uuid

import pytest

from prme_core import MemoryClient
from prme_core.canonical import canonical_json
from prme_core.profiles.model import RankingProfileApplication, RankingProfileState
from prme_core.profiles.registry import record_change
from prme_core.profiles.resolution import PointerResolver
from prme_core.receipts.projection import scope_key
from prme_core.retrieval.multipliers import RankingMultipliers
from prme_core.storage.keyed_records import record_operation_id
from prme_core.storage.session import StoreSession
from prme_core.types import utc_now
from tests.tampering import tamper

OWNER = "resolver-owner"


def _change(
    client: MemoryClient, *, lexical: float | None, previous: RankingProfileState | None
) -> RankingProfileState:
    """Record a pointer change directly: an activation of a fresh profile with ``lexical`` as
    its lexical multiplier, or (``lexical=None``) a deactivation."""
    profile_id = uuid.uuid4() if lexical is not None else None
    app = (
        None
        if profile_id is None
        else RankingProfileApplication(
            profile_id=profile_id,
            multipliers=RankingMultipliers(lexical=lexical),
            feature_identity_sha256=client.running_feature_identity(),
            base_scoring=client.settings.scoring,
        )
    )
    state = RankingProfileState(
        change_id=uuid.uuid4(),
        owner=OWNER,
        scopes=_scopes(client),
        action="activate" if app is not None else "deactivate",
        previous_profile_id=None if previous is None else previous.active_profile_id,
        active_profile_id=profile_id,
        application=app,
        changed_at=utc_now(),
    )
    with client.store.transaction() as tx:
        record_change(tx, state)
    return state


def _scopes(client: MemoryClient) -> tuple[str, ...]:
    return tuple(sorted(client.settings.scopes))


def _resolve(client: MemoryClient, resolver: PointerResolver):  # noqa: ANN202 - a ProfileResolution
    return resolver(OWNER, _scopes(client), client.settings.scoring, client.running_feature_identity())


@pytest.fixture
def client(store_url: str):  # noqa: ANN201
    with MemoryClient(store_url) as c:
        c.store_memory(OWNER, "the cat sat on the mat")
        yield c


def test_a_remembered_change_is_read_back_without_a_second_statement(client, monkeypatch) -> None:
    resolver = PointerResolver(client.store)
    state = _change(client, lexical=2.0, previous=None)
    first = _resolve(client, resolver)
    assert (first.status, first.profile_id) == ("applied", state.active_profile_id)

    def no_second_read(self, op_id, seq):  # noqa: ANN001, ANN202
        raise AssertionError("a remembered pointer change was read with a second statement")

    monkeypatch.setattr(StoreSession, "operation_at", no_second_read)
    again = _resolve(client, resolver)
    assert (again.status, again.profile_id, again.multipliers) == (
        "applied",
        state.active_profile_id,
        first.multipliers,
    )


def test_a_pointer_change_after_a_remembered_resolution_is_seen(client) -> None:
    resolver = PointerResolver(client.store)
    first = _change(client, lexical=2.0, previous=None)
    assert _resolve(client, resolver).profile_id == first.active_profile_id
    second = _change(client, lexical=3.0, previous=first)
    seen = _resolve(client, resolver)
    assert (seen.status, seen.profile_id) == ("applied", second.active_profile_id)
    assert seen.multipliers == RankingMultipliers(lexical=3.0)
    _change(client, lexical=None, previous=second)
    assert _resolve(client, resolver).status == "none"
    third = _change(client, lexical=4.0, previous=None)
    assert _resolve(client, resolver).profile_id == third.active_profile_id


def test_a_pointer_changed_by_another_client_is_seen_by_retrieval(client, store_url) -> None:
    first = _change(client, lexical=2.0, previous=None)
    assert client.retrieve("cat", owner=OWNER).metadata.ranking_profile_id == first.active_profile_id
    with MemoryClient(store_url) as other:  # another client (and store) on the same database
        second = _change(other, lexical=3.0, previous=first)
    assert client.retrieve("cat", owner=OWNER).metadata.ranking_profile_id == second.active_profile_id


def test_a_remembered_change_whose_log_row_is_altered_fails_closed(client) -> None:
    resolver = PointerResolver(client.store)
    state = _change(client, lexical=2.0, previous=None)
    assert _resolve(client, resolver).status == "applied"
    forged = json.loads(state.canonical_bytes())
    forged["application"]["multipliers"] = {**forged["application"]["multipliers"], "lexical": 4.0}
    op_id = record_operation_id("ranking-profile-state", OWNER, state.change_id)
    tamper(client.store, "UPDATE operations SET payload = ? WHERE id = ?", [canonical_json(forged).decode(), op_id])
    seen = _resolve(client, resolver)
    assert (seen.status, seen.reason, seen.multipliers) == ("inapplicable", "pointer_record_corrupt", None)


def test_a_remembered_change_whose_head_is_put_back_fails_closed(client) -> None:
    resolver = PointerResolver(client.store)
    first = _change(client, lexical=2.0, previous=None)
    key = [OWNER, scope_key(_scopes(client))]
    head_sql = "FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ?"
    with client.store.transaction() as tx:
        older_head = tx.conn.fetchall(f"SELECT op_id, op_seq, payload, checksum {head_sql}", key)[0]
    _change(client, lexical=None, previous=first)
    assert _resolve(client, resolver).status == "none"
    assert _resolve(client, resolver).status == "none"
    tamper(
        client.store,
        "UPDATE ranking_pointer_heads SET op_id = ?, op_seq = ?, payload = ?, checksum = ? "
        "WHERE owner = ? AND scope_key = ?",
        [*older_head, *key],
    )  # a genuine head row the resolver verified before, put back over a newer change
    seen = _resolve(client, resolver)
    assert (seen.status, seen.reason) == ("inapplicable", "pointer_head_stale")


def test_a_remembered_change_whose_head_is_removed_fails_closed(client) -> None:
    resolver = PointerResolver(client.store)
    _change(client, lexical=2.0, previous=None)
    assert _resolve(client, resolver).status == "applied"
    tamper(
        client.store,
        "DELETE FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ?",
        [OWNER, scope_key(_scopes(client))],
    )
    seen = _resolve(client, resolver)
    assert (seen.status, seen.reason) == ("inapplicable", "pointer_head_stale")


def test_the_resolver_remembers_at_most_its_capacity(client) -> None:
    resolver = PointerResolver(client.store, capacity=1)
    _change(client, lexical=2.0, previous=None)
    for _ in range(3):
        assert _resolve(client, resolver).status == "applied"
    assert len(resolver._verified) == 1


def _count_pointer_reads(monkeypatch) -> list[int]:  # noqa: ANN001
    calls = [0]
    real = StoreSession.pointer_read

    def counted(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(StoreSession, "pointer_read", counted)
    return calls


def test_an_unchanged_duckdb_store_resolves_without_a_statement(client, monkeypatch) -> None:
    """DuckDB: between two retrievals nothing but the first one's receipt was written, so the
    second reuses the first's pointer read. PostgreSQL has other writers and reads every time."""
    state = _change(client, lexical=2.0, previous=None)
    reads = _count_pointer_reads(monkeypatch)
    for _ in range(3):
        meta = client.retrieve("cat", owner=OWNER).metadata
        assert (meta.ranking_profile_status, meta.ranking_profile_id) == ("applied", state.active_profile_id)
    assert reads[0] == (1 if client.store.backend == "duckdb" else 3)


def test_every_write_but_a_retrievals_own_counts_as_a_change(client) -> None:
    store = client.store
    if store.backend != "duckdb":
        assert store.state_version() is None
        return
    version = store.state_version()
    client.retrieve("cat", owner=OWNER)
    assert store.state_version() == version  # the receipt and its projection are appends
    client.store_memory(OWNER, "a dog on the rug")
    assert store.state_version() > version
    version = store.state_version()
    tamper(store, "UPDATE memory_revisions SET revision = revision WHERE owner = ?", [OWNER])
    assert store.state_version() > version
    version = store.state_version()
    with store.transaction(read_only=True) as tx:  # autocommit: a change counts at once
        tx.conn.execute("DELETE FROM memory_revisions WHERE owner = ?", ["nobody"])
    assert store.state_version() > version
    version = store.state_version()
    with pytest.raises(RuntimeError), store.transaction() as tx:  # rolled back: counted all the same
        tx.conn.execute("DELETE FROM memory_revisions WHERE owner = ?", ["nobody"])
        raise RuntimeError("abandon")
    assert store.state_version() > version
    version = store.state_version()
    store.vacuum()
    assert store.state_version() > version


def test_memories_written_by_another_client_are_retrieved_at_once(client, store_url) -> None:
    assert not [r for r in client.retrieve("zebra", owner=OWNER).results if "zebra" in r.content]
    with MemoryClient(store_url) as other:
        other.store_memory(OWNER, "a zebra crossed the road")
    assert [r for r in client.retrieve("zebra", owner=OWNER).results if "zebra" in r.content]


@pytest.mark.parametrize(
    ("sql", "changes"),
    [
        ("SELECT 1", False),
        ("  select owner FROM operations", False),
        ("INSERT INTO operations (id) VALUES (?)", False),
        ("insert into receipt_projections (owner) SELECT unnest(?)", False),
        ("INSERT INTO operations_shadow (id) VALUES (?)", True),
        ("INSERT INTO ranking_pointer_heads (owner) VALUES (?)", True),
        ("UPDATE operations SET payload = ?", True),
        ("DELETE FROM receipt_projections", True),
        ("SELECT 1; DELETE FROM memory_revisions", True),
        ("WITH x AS (SELECT 1) DELETE FROM memory_revisions", True),
        ("CHECKPOINT", True),
    ],
)
def test_which_statements_count_as_a_change(sql: str, changes: bool) -> None:
    from prme_core.storage.duckdb_backend import _changes_state

    assert _changes_state(sql) is changes
