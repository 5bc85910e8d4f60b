"""Input validation at the public API (issue 13): every argument is checked before any work, both
backends accept and reject the same text, scope names are exact, flags and counts are strict."""

import asyncio
import math
import uuid
from datetime import timedelta

import pytest

from prme_assets.partitions import decode_target, encode_target
from prme_core import MemoryClient
from prme_core.engine import MemoryEngine
from prme_core.engine import client as client_module
from prme_core.errors import InvalidInput, UnsupportedOperation
from prme_core.settings import EngineSettings
from prme_core.storage import parse_store_url
from prme_core.types import is_scope_name
from prme_core.validation import check_owner, check_scope_set
from tests.learning_lab import NOW, build_lab, feedback_question

OWNER = "alice"
SCOPES = ["personal"]
TOPICS = ("cat", "dog", "garden", "piano")
DIGEST = "ab" * 32
_TABLES = ("operations", "memory_node_versions", "memory_edges", "receipt_projections", "ranking_pointer_heads")


def _rows(client: MemoryClient) -> dict[str, int]:
    """Row counts of every table a call could write (the append-only log first)."""
    with client.store.transaction() as tx:
        return {t: tx.conn.fetchall(f"SELECT count(*) FROM {t}")[0][0] for t in _TABLES}


@pytest.fixture
def lab(client):
    """Memories, feedback and registered holdout queries for (alice, personal), plus a proposal."""
    found = build_lab(client, topics=TOPICS)
    proposal = client.evaluate_learning(OWNER, scopes=SCOPES)
    return client, found, proposal


def _refused(client, call, error=InvalidInput):
    """Run ``call``, expect ``error``, and assert nothing was written; return the error."""
    before = _rows(client)
    with pytest.raises(error) as caught:
        call()
    assert _rows(client) == before
    return caught.value


# --- item 2: validate before any work ------------------------------------------------------------

BAD_HOLDOUT_CONFIGS = [
    ({"min_query_groups": 0}, "config.min_query_groups"),
    ({"colour": "red"}, "config.colour"),
    ({"min_ndcg_gain": math.nan}, "config.min_ndcg_gain"),
    ("not a mapping", "config"),
]


@pytest.mark.parametrize(
    "config,field", BAD_HOLDOUT_CONFIGS, ids=["zero-groups", "unknown-key", "nan", "not-a-mapping"]
)
def test_a_refused_evaluate_holdout_config_leaves_the_operations_log_unchanged(lab, config, field):
    client, _, proposal = lab
    error = _refused(client, lambda: client.evaluate_holdout(proposal, config=config))
    assert error.field == field


def test_the_async_engine_refuses_the_same_config_before_any_work(lab):
    client, _, proposal = lab
    engine = MemoryEngine(store=client.store)
    error = _refused(client, lambda: asyncio.run(engine.evaluate_holdout(proposal, config={"min_query_groups": 0})))
    assert error.field == "config.min_query_groups"


def test_evaluate_holdout_with_a_plain_dict_proposal_is_a_typed_error_and_writes_nothing(lab):
    client, _, _ = lab
    error = _refused(client, lambda: client.evaluate_holdout({"owner": OWNER}))
    assert error.field.startswith("proposal")


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"excluded_query_digests": 5}, "excluded_query_digests"),
        ({"excluded_query_digests": [["nested"]]}, "excluded_query_digests"),
        ({"limit_override": True}, "limit_override"),
        ({"candidate_multipliers": {"lexical": 9.0}}, "candidate_multipliers.lexical"),
        ({"baseline_multipliers": "unity"}, "baseline_multipliers"),
    ],
    ids=[
        "digests-not-iterable",
        "digests-unhashable",
        "bool-limit",
        "multiplier-out-of-bounds",
        "baseline-not-mapping",
    ],
)
def test_a_refused_run_holdout_argument_leaves_the_operations_log_unchanged(lab, kwargs, field):
    client, _, _ = lab
    args = {"candidate_multipliers": {"lexical": 2.0}, **kwargs}
    error = _refused(client, lambda: client.run_holdout(OWNER, SCOPES, **args))
    assert error.field == field


def test_run_holdout_refuses_multipliers_under_rank_fusion_before_the_first_retrieval(store_url, client):
    build_lab(client, topics=TOPICS, feedback=False)
    settings = EngineSettings(store_url=store_url, scoring={"fusion": "rrf"})
    with MemoryClient(settings=settings) as rrf:
        _refused(
            rrf, lambda: rrf.run_holdout(OWNER, SCOPES, candidate_multipliers={"lexical": 2.0}), UnsupportedOperation
        )


def test_evaluate_full_retrieval_validates_every_argument_before_reading_receipts(client, monkeypatch):
    def no_reads(*args, **kwargs):
        raise AssertionError("receipts were read before the arguments were validated")

    monkeypatch.setattr(client_module, "get_receipts", no_reads)
    trial = {
        "group_id": "g",
        "baseline_request_id": uuid.uuid4(),
        "candidate_request_id": uuid.uuid4(),
        "relevant_node_ids": [uuid.uuid4()],
    }
    good = {
        "owner": OWNER,
        "scopes": SCOPES,
        "proposal_input_checksum": DIGEST,
        "memory_artifact_sha256": DIGEST,
        "candidate_multipliers": {"lexical": 2.0},
    }
    for bad, field in (
        ({"config": {"min_query_groups": 0}}, "config.min_query_groups"),
        ({"proposal_input_checksum": "nope"}, "proposal_input_checksum"),
        ({"memory_artifact_sha256": None}, "memory_artifact_sha256"),
        ({"scopes": ["galaxy"]}, "scopes"),
        ({"baseline_multipliers": {"graph": 0.0}}, "baseline_multipliers.graph"),
        ({"trials": []}, "trials"),
    ):
        arguments = {"trials": [trial], **good, **bad}
        with pytest.raises(InvalidInput) as caught:
            client.evaluate_full_retrieval(arguments.pop("trials"), **arguments)
        assert caught.value.field == field


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"config": {"min_training_queries": 0}}, "config.min_training_queries"),
        ({"config": {"colour": "red"}}, "config.colour"),
        ({"surface": "everything"}, "surface"),
        ({"scopes": ["galaxy"]}, "scopes"),
        ({"query_groups": ["not", "a", "mapping"]}, "query_groups"),
        ({"query_groups": {"not-a-request-id": "g"}}, "query_groups"),
    ],
    ids=["zero-queries", "unknown-key", "surface", "unknown-scope", "groups-not-mapping", "groups-bad-key"],
)
def test_evaluate_learning_validates_every_argument_before_cutting_the_snapshot(client, monkeypatch, kwargs, field):
    def no_snapshot(*args, **kw):
        raise AssertionError("the snapshot was cut before the arguments were validated")

    monkeypatch.setattr(client_module, "cut_snapshot", no_snapshot)
    with pytest.raises(InvalidInput) as caught:
        client.evaluate_learning(OWNER, **{"scopes": SCOPES, **kwargs})
    assert caught.value.field == field


def test_ranking_profile_history_validates_before_before_reading(client, monkeypatch):
    monkeypatch.setattr(client_module.profiles, "history", lambda *a, **k: pytest.fail("read before validating"))
    with pytest.raises(InvalidInput, match="before"):
        client.ranking_profile_history(OWNER, SCOPES, before="not-a-change-id")


# --- item 5: NUL characters are refused identically on both backends ---------------------------


@pytest.mark.parametrize(
    "item,field",
    [
        ({"content": "cat\x00 repair"}, "items[0].content"),
        ({"content": "cat", "session_id": "s\x001"}, "items[0].session_id"),
        ({"content": "cat", "metadata": {"note": "a\x00b"}}, "items[0].metadata"),
        ({"content": "cat", "metadata": {"k\x00": 1}}, "items[0].metadata"),
        ({"content": "cat", "metadata": {"deep": [{"x": ["\x00"]}]}}, "items[0].metadata"),
    ],
    ids=["content", "session-id", "metadata-value", "metadata-key", "metadata-nested"],
)
def test_nul_in_stored_memory_text_is_a_typed_error_on_both_backends(client, item, field):
    error = _refused(client, lambda: client.store_memory(OWNER, item))
    assert error.field == field and "NUL" in str(error)


def test_nul_in_a_supersede_replacement_or_an_edge_is_a_typed_error(client):
    a, b = client.store_batch(OWNER, ["The cat repair costs forty dollars", "Alice has a cat"])
    error = _refused(client, lambda: client.supersede(OWNER, a.id, "cat\x00"))
    assert error.field == "replacement.content"
    error = _refused(client, lambda: client.link(OWNER, a.id, b.id, metadata={"why": "\x00"}))
    assert error.field == "metadata"


def test_a_retrieval_query_with_nul_is_refused_before_any_work(client):
    client.store_memory(OWNER, "The cat repair costs forty dollars")
    error = _refused(client, lambda: client.retrieve("cat\x00repair", owner=OWNER, reference_time=NOW))
    assert error.field == "query"


@pytest.mark.parametrize(
    "change,field",
    [
        ({"query": "how much\x00 is it"}, "queries[0].query"),
        ({"group": "g\x00"}, "queries[0].group"),
    ],
    ids=["query", "group"],
)
def test_a_holdout_query_with_nul_cannot_be_registered(lab, change, field):
    client, found, _ = lab
    spec = {
        "query": "what is the cat price",
        "relevant_node_ids": [found.relevant["cat"]],
        "reference_time": NOW,
        **change,
    }
    error = _refused(client, lambda: client.register_holdout_queries(OWNER, SCOPES, [spec]))
    assert error.field == field


def test_an_answer_id_with_nul_cannot_be_recorded(client):
    client.store_memory(OWNER, "The cat repair costs forty dollars")
    response = client.retrieve("cat repair", owner=OWNER, reference_time=NOW)
    error = _refused(
        client,
        lambda: client.record_answer_citations(
            response.metadata.request_id, owner=OWNER, answer_id="a\x00", cited_node_ids=[], method="model_reported"
        ),
    )
    assert error.field == "answer_id"


def test_query_group_names_and_trial_groups_with_nul_are_refused(lab):
    client, _, _ = lab
    request_id = client.retrieve(feedback_question("cat"), owner=OWNER, reference_time=NOW).metadata.request_id
    with pytest.raises(InvalidInput, match="query_groups"):
        client.evaluate_learning(OWNER, scopes=SCOPES, query_groups={request_id: "g\x00"})
    trial = {
        "group_id": "g\x00",
        "baseline_request_id": uuid.uuid4(),
        "candidate_request_id": uuid.uuid4(),
        "relevant_node_ids": [uuid.uuid4()],
    }
    with pytest.raises(InvalidInput) as caught:
        client.evaluate_full_retrieval(
            [trial],
            owner=OWNER,
            scopes=SCOPES,
            proposal_input_checksum=DIGEST,
            memory_artifact_sha256=DIGEST,
            candidate_multipliers={},
        )
    assert caught.value.field == "trials[0].group_id"


def test_text_without_nul_round_trips_on_both_backends(client):
    node = client.store_memory(
        OWNER, {"content": "tab\tnew\nline \u0085 \u2028 é", "session_id": "s\n1", "metadata": {"k\t": ["v\r\n"]}}
    )
    assert client.get(OWNER, node.id) == node


# --- item 6: exact scope names, configured scopes only -------------------------------------------


@pytest.mark.parametrize("name", ["personal\n", "personal\r", "personal ", "\npersonal"])
def test_a_scope_name_with_a_trailing_or_leading_newline_is_not_a_scope_name(name):
    assert not is_scope_name(name)
    with pytest.raises(InvalidInput, match="scopes"):
        check_scope_set([name])
    with pytest.raises(InvalidInput):
        encode_target(OWNER, [name])
    with pytest.raises(InvalidInput):
        decode_target(f"{OWNER}::{name}")


def _scope_calls(client, scopes, node_id):
    return {
        "register_holdout_queries": lambda: client.register_holdout_queries(
            OWNER, scopes, [{"query": "what is the cat price", "relevant_node_ids": [node_id], "reference_time": NOW}]
        ),
        "list_holdout_queries": lambda: client.list_holdout_queries(OWNER, scopes),
        "retire_holdout_queries": lambda: client.retire_holdout_queries(OWNER, scopes, [uuid.uuid4()]),
        "run_holdout": lambda: client.run_holdout(OWNER, scopes, candidate_multipliers={}),
        "holdout_baseline": lambda: client.holdout_baseline(OWNER, scopes),
        "deactivate_ranking_profile": lambda: client.deactivate_ranking_profile(
            owner=OWNER, scopes=scopes, expected_profile_id=None
        ),
        "rollback_ranking_profile": lambda: client.rollback_ranking_profile(None, owner=OWNER, scopes=scopes),
        "get_active_ranking_profile": lambda: client.get_active_ranking_profile(OWNER, scopes),
        "ranking_profile_history": lambda: client.ranking_profile_history(OWNER, scopes),
        "ranking_profile_at": lambda: client.ranking_profile_at(OWNER, scopes, NOW),
        "evaluate_learning": lambda: client.evaluate_learning(OWNER, scopes=scopes),
        "scan": lambda: client.scan(OWNER, scopes=scopes),
    }


SCOPE_CALLS = list(_scope_calls(None, None, None))


@pytest.mark.parametrize("call", SCOPE_CALLS)
@pytest.mark.parametrize("scope", ["galaxy", "personal\n"])
def test_scoped_calls_refuse_unconfigured_or_malformed_scopes_before_writing(client, call, scope):
    node = client.store_memory(OWNER, "The cat repair costs forty dollars")
    error = _refused(client, _scope_calls(client, [scope], node.id)[call])
    assert error.field == "scopes" and repr(scope) in str(error)
    if scope == "galaxy":
        assert "configured scopes" in str(error) and "personal" in str(error)


def test_an_engine_refuses_pointer_changes_of_scopes_it_is_not_configured_for(store_url):
    settings = EngineSettings(store_url=store_url, scopes=("personal",))
    with MemoryClient(settings=settings) as narrow:
        error = _refused(narrow, lambda: narrow.deactivate_ranking_profile(owner=OWNER, scopes=["project"]))
        assert "configured scopes: ['personal']" in str(error)


# --- item 7: smaller gaps ------------------------------------------------------------------------


@pytest.mark.parametrize("owner", ["al\u0085ice", "al\u2028ice", "al\u2029ice", "al\x9fice", "al\x80ice", "al\x00ice"])
def test_owners_with_unicode_control_or_line_separator_characters_are_refused(owner):
    with pytest.raises(InvalidInput) as caught:
        check_owner(owner)
    assert caught.value.field == "owner"
    with pytest.raises(InvalidInput):
        encode_target(owner, SCOPES)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"limit": True}, "limit"),
        ({"limit": 5.0}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"min_score": True}, "min_score"),
        ({"include_cross_scope": "yes"}, "include_cross_scope"),
        ({"include_cross_scope": 1}, "include_cross_scope"),
    ],
    ids=["bool-limit", "float-limit", "string-limit", "bool-min-score", "string-flag", "int-flag"],
)
def test_retrieve_does_not_coerce_bools_or_strings(client, kwargs, field):
    client.store_memory(OWNER, "The cat repair costs forty dollars")
    error = _refused(client, lambda: client.retrieve("cat", owner=OWNER, reference_time=NOW, **kwargs))
    assert error.field == field


@pytest.mark.parametrize("flag", ["yes", 1, None])
def test_scan_flags_are_strict_bools(client, flag):
    with pytest.raises(InvalidInput, match="include_inactive"):
        client.scan(OWNER, include_inactive=flag)


@pytest.mark.parametrize("low,high", [("time_from", "time_to"), ("event_time_from", "event_time_to")])
def test_an_inverted_time_window_names_its_fields(client, low, high):
    client.store_memory(OWNER, "The cat repair costs forty dollars")
    error = _refused(
        client,
        lambda: client.retrieve("cat", owner=OWNER, reference_time=NOW, **{low: NOW, high: NOW - timedelta(days=1)}),
    )
    assert error.field == high and low in str(error)
    spec = {
        "query": "cat",
        "relevant_node_ids": [uuid.uuid4()],
        "reference_time": NOW,
        low: NOW,
        high: NOW - timedelta(days=1),
    }
    error = _refused(client, lambda: client.register_holdout_queries(OWNER, SCOPES, [spec]))
    assert error.field == f"queries[0].{high}" and low in str(error)


def test_create_ranking_profile_with_plain_dicts_is_a_typed_error(client):
    error = _refused(client, lambda: client.create_ranking_profile({"owner": OWNER}, {"owner": OWNER}, owner=OWNER))
    assert error.field.startswith("proposal")
    with pytest.raises(InvalidInput) as caught:
        client.create_ranking_profile("proposal", None, owner=OWNER)
    assert caught.value.field == "proposal"


@pytest.mark.parametrize(
    "url,option",
    [
        ("duckdb:///x.duckdb?lock_timeout=abc", "lock_timeout"),
        ("duckdb:///x.duckdb?lock_timeout=nan", "lock_timeout"),
        ("duckdb:///x.duckdb?lock_timeout=inf", "lock_timeout"),
        ("duckdb:///x.duckdb?lock_timeout=-1", "lock_timeout"),
        ("duckdb:///x.duckdb?lock_timeout=1e9", "lock_timeout"),
        ("postgresql://u@h/db?pool_size=abc", "pool_size"),
        ("postgresql://u@h/db?pool_size=0", "pool_size"),
        ("postgresql://u@h/db?pool_size=", "pool_size"),
        ("postgresql://u@h/db?pool_size=2.5", "pool_size"),
        ("postgresql://u@h/db?pool_size=100000", "pool_size"),
        ("postgresql://u@h/db?prme_schema=MixedCase", "prme_schema"),
        ("postgresql://u@h/db?prme_schema=pg_mine", "prme_schema"),
        ("postgresql://u@h/db?prme_schema=caf%C3%A9", "prme_schema"),
        ("postgresql://u@h/db?prme_schema=" + "s" * 64, "prme_schema"),
    ],
)
def test_store_url_options_outside_their_bounds_are_typed_errors(url, option):
    with pytest.raises(InvalidInput) as caught:
        parse_store_url(url)
    assert caught.value.field == f"store_url.{option}" and "must be" in str(caught.value)


def test_store_url_options_within_their_bounds_are_kept():
    assert parse_store_url("duckdb:///x.duckdb?lock_timeout=2.5").options == {"lock_timeout": "2.5"}
    assert parse_store_url("postgresql://u@h/db?pool_size=8&prme_schema=t_ab_1").options == {
        "pool_size": "8",
        "prme_schema": "t_ab_1",
    }
