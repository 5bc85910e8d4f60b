"""The partition key codec: every valid (owner, scope set) round-trips; nothing else decodes."""

import pytest
from dagster._core.definitions.partitions.utils.base import INVALID_PARTITION_SUBSTRINGS
from hypothesis import given
from hypothesis import strategies as st

from prme_assets.partitions import decode_target, encode_target
from prme_core.errors import InvalidInput

owners = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=80).filter(
    lambda s: s == s.strip() and s.strip()
)
scope_names = st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True)


@given(owner=owners, scopes=st.lists(scope_names, min_size=1, max_size=4))
def test_every_valid_owner_and_scope_set_round_trips_to_a_dagster_safe_key(owner, scopes):
    key = encode_target(owner, scopes)
    assert decode_target(key) == (owner, tuple(sorted(set(scopes))))
    assert not any(bad in key for bad in INVALID_PARTITION_SUBSTRINGS)
    assert key.count("::") == 1


def test_scope_order_and_repeats_do_not_change_the_key():
    assert encode_target("alice", ["project", "personal", "project"]) == "alice::personal+project"


@pytest.mark.parametrize(
    "key",
    [
        "alice",
        "alice::",
        "::personal",
        "a::b::c",
        "alice::Personal",
        "alice::project+personal",
        "alice::personal+personal",
        "al%ZZce::personal",
        "a.b::personal",
        "al\nice::personal",
    ],
)
def test_keys_this_codec_did_not_produce_are_rejected(key):
    with pytest.raises(InvalidInput):
        decode_target(key)


@pytest.mark.parametrize(
    "owner,scopes",
    [
        ("", ["personal"]),
        (" alice", ["personal"]),
        ("al\x00ice", ["personal"]),
        ("alice", []),
        ("alice", ["Not A Scope"]),
    ],
)
def test_what_a_key_cannot_hold_is_rejected_on_encode(owner, scopes):
    with pytest.raises(InvalidInput):
        encode_target(owner, scopes)
