"""API keys (issue 18): a key names its owner and scope limit; the store keeps a salted digest
only; revocation and expiry are appended facts; every refusal is ``Unauthenticated`` with a reason."""

from datetime import timedelta

import pytest

from prme_core.access.keys import OP_KEY, OP_KEY_REVOKED
from prme_core.errors import ApiKeyNotFound, InvalidInput, ScopeForbidden, Unauthenticated
from prme_core.types import utc_now


def _payloads(client) -> list[str]:
    with client.store.transaction() as tx:
        return [
            r[0]
            for r in tx.conn.fetchall(
                "SELECT payload FROM operations WHERE op_type IN (?, ?)", [OP_KEY, OP_KEY_REVOKED]
            )
        ]


def test_a_created_key_authenticates_as_its_owner_and_scopes(client):
    created = client.create_api_key("alice", scopes=["project", "personal"])
    principal = client.authenticate(created.api_key)
    assert (principal.owner, principal.scopes, principal.key_id) == (
        "alice",
        ("personal", "project"),
        created.key.key_id,
    )
    assert principal.permits(["personal"]) and not principal.permits(["personal", "agent"])
    with pytest.raises(ScopeForbidden, match="'agent' is outside"):
        principal.require(["agent"])
    assert client.authenticate(client.create_api_key("bob").api_key).scopes is None


def test_the_store_keeps_a_salted_digest_never_the_key(client):
    first = client.create_api_key("alice")
    second = client.create_api_key("alice")
    secret = first.api_key.removeprefix(f"prme_{first.key.key_id}_")  # a secret may itself hold "_"
    assert len(secret) == 43
    assert all(secret not in p and first.api_key not in p for p in _payloads(client))
    assert first.key.salt != second.key.salt and first.key.secret_hmac_sha256 != second.key.secret_hmac_sha256


@pytest.mark.parametrize(
    "presented, reason",
    [(None, "missing"), ("", "missing"), ("Bearer x", "malformed"), ("prme_" + "a" * 24 + "_short", "malformed")],
)
def test_missing_and_malformed_keys_are_refused(client, presented, reason):
    with pytest.raises(Unauthenticated) as caught:
        client.authenticate(presented)
    assert caught.value.reason == reason


def test_a_wrong_secret_and_an_unknown_key_read_alike(client):
    created = client.create_api_key("alice")
    prefix, key_id, secret = created.api_key.split("_", 2)
    flipped = ("A" if secret[0] != "A" else "B") + secret[1:]
    reasons = []
    for presented in (f"{prefix}_{key_id}_{flipped}", f"{prefix}_{'0' * 24}_{secret}"):
        with pytest.raises(Unauthenticated) as caught:
            client.authenticate(presented)
        reasons.append((caught.value.reason, str(caught.value)))
    assert reasons[0] == reasons[1] == ("unknown", "the API key is not known to this store")


def test_revocation_is_an_appended_record_and_idempotent(client):
    created = client.create_api_key("alice")
    first = client.revoke_api_key(created.key.key_id)
    again = client.revoke_api_key(created.key.key_id)
    assert again == first
    with pytest.raises(Unauthenticated) as caught:
        client.authenticate(created.api_key)
    assert caught.value.reason == "revoked"
    with client.store.transaction() as tx:
        counts = dict(tx.conn.fetchall("SELECT op_type, count(*) FROM operations GROUP BY op_type"))
    assert (counts[OP_KEY], counts[OP_KEY_REVOKED]) == (1, 1)
    with pytest.raises(ApiKeyNotFound):
        client.revoke_api_key("f" * 24)
    with pytest.raises(InvalidInput, match="key_id"):
        client.revoke_api_key("not-a-key-id")


def test_an_expired_key_is_refused(client):
    from prme_core.access.keys import authenticate

    expires = utc_now() + timedelta(hours=1)
    created = client.create_api_key("alice", expires_at=expires)
    assert client.authenticate(created.api_key).expires_at == expires
    with pytest.raises(Unauthenticated) as caught:
        authenticate(client.store, created.api_key, now=expires + timedelta(seconds=1))
    assert caught.value.reason == "expired"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"scopes": ["galaxy"]}, "scopes"),
        ({"scopes": []}, "scopes"),
        ({"expires_at": utc_now() - timedelta(days=1)}, "expires_at"),
        ({"expires_at": utc_now().replace(tzinfo=None) + timedelta(days=1)}, "expires_at"),
        ({"expires_at": "tomorrow"}, "expires_at"),
    ],
)
def test_bad_key_arguments_name_the_field_and_write_nothing(client, kwargs, field):
    with pytest.raises(InvalidInput) as caught:
        client.create_api_key("alice", **kwargs)
    assert caught.value.field == field
    assert _payloads(client) == []


def test_listing_shows_states_and_filters_by_owner(client):
    alice = client.create_api_key("alice")
    client.create_api_key("bob", scopes=["project"])
    client.revoke_api_key(alice.key.key_id)
    everyone = client.list_api_keys()
    assert [(s.key.owner, s.state(utc_now())) for s in everyone] == [("alice", "revoked"), ("bob", "active")]
    assert [s.key.owner for s in client.list_api_keys("bob")] == ["bob"]
