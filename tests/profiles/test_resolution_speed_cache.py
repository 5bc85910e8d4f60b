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
