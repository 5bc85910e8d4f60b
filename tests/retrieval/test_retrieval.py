"""Retrieval pipeline and receipts on both backends."""

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from prme_core import MemoryClient
from prme_core.errors import InvalidInput, UnsupportedOperation
from prme_core.receipts.store import OP_RECEIPT, receipt_bytes
from prme_core.retrieval import pipeline as pipeline_module
from prme_core.retrieval.reranker import TokenOverlapReranker
from prme_core.retrieval.tokenizer import count_tokens

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = datetime(2024, 6, 1, tzinfo=UTC)

MEMORIES = [
    {"content": "Alice: I adopted a grey cat named Miso last spring", "session_id": "s1", "event_time": T0},
    {"content": "Bob: Miso sounds lovely, what does she eat?", "session_id": "s1", "event_time": T0},
    {"content": "Alice: Miso eats salmon and refuses dry food", "session_id": "s1", "event_time": T0},
    {
        "content": "Alice: my sister lives in Lisbon and teaches piano",
        "session_id": "s2",
        "event_time": T0 + timedelta(days=30),
        "node_type": "fact",
    },
    {
        "content": "Bob: I went hiking in the Alps with my brother",
        "session_id": "s2",
        "event_time": T0 + timedelta(days=30),
    },
    {"content": "Alice prefers green tea in the morning", "node_type": "preference", "salience": 0.9},
    {
        "content": "Alice: I switched to a Pixel phone, the old iPhone broke",
        "session_id": "s3",
        "event_time": T0 + timedelta(days=90),
    },
    {"content": "Alice: my phone is an iPhone 12", "session_id": "s4", "event_time": T0 + timedelta(days=10)},
    {"content": "Project notes: the launch moved to March 2024", "scope": "project", "node_type": "decision"},
    {
        "content": "Alice: we booked a trip to Kyoto for 8 May 2024",
        "session_id": "s5",
        "event_time": T0 + timedelta(days=60),
    },
]


@pytest.fixture
def loaded(client: MemoryClient) -> MemoryClient:
    nodes = client.store_batch("alice", MEMORIES)
    client.link("alice", nodes[0].id, nodes[2].id, "relates_to")
    client.store_batch("bob", [{"content": "Bob's cat is called Miso too"}])
    return client


def _receipt_count(client: MemoryClient, owner: str = "alice") -> int:
    with client.store.transaction() as tx:
        return len(tx.list_operations(owner, OP_RECEIPT, limit=1000))


def test_retrieval_returns_ranked_results_and_a_persisted_receipt(loaded):
    response = loaded.retrieve("What is the name of Alice's cat?", owner="alice", reference_time=NOW, limit=5)
    assert response.results[0].content.startswith("Alice: I adopted a grey cat named Miso")
    assert [r.rank for r in response.results] == list(range(len(response.results)))
    scores = [r.score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    meta = response.metadata
    assert meta.receipt_persisted and meta.schema_version == 11 and meta.ranking_profile_status == "none"
    stored = loaded.get_receipt(meta.request_id, "alice")
    assert stored == response.receipt
    assert hashlib.sha256(receipt_bytes(stored)).hexdigest() == meta.receipt_checksum


def test_receipt_replays_to_its_recorded_scores_and_order(loaded):
    receipt = loaded.retrieve("cat food salmon", owner="alice", reference_time=NOW).receipt
    replayed = receipt.replay_ranking()
    assert replayed.order == tuple(c.node_id for c in receipt.candidates)
    assert replayed.scores == tuple(c.score for c in receipt.candidates)
    receipt.validate()


def test_receipt_holds_identities_and_hashes_but_no_candidate_text(loaded):
    response = loaded.retrieve("Lisbon piano sister", owner="alice", reference_time=NOW)
    data = receipt_bytes(response.receipt).decode()
    for result in response.results:
        assert result.content not in data
        cand = response.receipt.candidate(result.node_id)
        assert cand.content_sha256 == hashlib.sha256(result.content.encode()).hexdigest()


def test_context_hash_is_the_sha256_of_the_rendered_bundle(loaded):
    response = loaded.retrieve("hiking in the Alps", owner="alice", reference_time=NOW)
    assert response.receipt.context_sha256 == hashlib.sha256(response.context.encode()).hexdigest()
    assert response.receipt.context_tokens == count_tokens(response.context) == response.bundle.tokens_used


@pytest.mark.parametrize("budget", [16, 40, 90, 200, 2048])
def test_rendered_bundle_never_exceeds_the_token_budget(loaded, budget):
    response = loaded.retrieve("Alice cat phone tea", owner="alice", reference_time=NOW, token_budget=budget)
    assert count_tokens(response.context) <= budget
    in_context = [c for c in response.receipt.candidates if c.in_context]
    assert sum(c.token_cost for c in in_context) <= budget
    assert response.receipt.packing.token_budget == budget


@pytest.mark.parametrize("ordering", ["density", "score", "balanced"])
@pytest.mark.parametrize("fmt", ["auditable", "compact"])
@pytest.mark.parametrize("guidance", ["off", "temporal", "all"])
def test_packing_policy_format_and_guidance_are_recorded_and_honoured(loaded, ordering, fmt, guidance):
    response = loaded.retrieve(
        "When did Alice book the Kyoto trip?",
        owner="alice",
        reference_time=NOW,
        packing={"multipath_ordering": ordering, "context_format": fmt, "context_guidance_mode": guidance},
    )
    packing = response.receipt.packing
    assert (packing.multipath_ordering, packing.context_format, packing.context_guidance_mode) == (
        ordering,
        fmt,
        guidance,
    )
    bundle = response.bundle
    assert (bundle.multipath_ordering, bundle.context_format, bundle.context_guidance_mode) == (ordering, fmt, guidance)
    lines = response.context.split("\n")
    entry_lines = lines[-len(bundle.entries) :]
    if fmt == "compact":
        assert all(line.startswith(f"[{i + 1}] ") for i, line in enumerate(entry_lines))
    else:
        assert all(line.startswith("{") for line in entry_lines)
    has_guidance = guidance != "off"  # the query is temporal, so "temporal" guidance applies
    assert (bundle.guidance is not None) == has_guidance
    if ordering == "score":
        ranks = [e.rank for e in bundle.entries if e.rank is not None]
        priority = [e for e in bundle.entries if response.results[e.rank].node_type in ("instruction", "preference")]
        assert ranks[len(priority) :] == sorted(ranks[len(priority) :])


def test_guidance_temporal_mode_adds_nothing_for_a_non_temporal_query(loaded):
    response = loaded.retrieve(
        "Alice cat", owner="alice", reference_time=NOW, packing={"context_guidance_mode": "temporal"}
    )
    assert response.bundle.guidance is None and response.receipt.packing.context_guidance_mode == "temporal"


BAD_ARGUMENTS = [
    ("blank query", {"query": "  "}, "query"),
    ("huge query", {"query": "x" * 5000}, "query"),
    ("blank owner", {"owner": " "}, "owner"),
    ("unknown scope", {"scopes": ["galaxy"]}, "scopes"),
    ("empty scopes", {"scopes": []}, "scopes"),
    ("naive clock", {"reference_time": datetime(2024, 1, 1)}, "reference_time"),
    ("zero limit", {"limit": 0}, "limit"),
    ("huge limit", {"limit": 201}, "limit"),
    ("negative min score", {"min_score": -1}, "min_score"),
    ("tiny budget", {"token_budget": 3}, "token_budget"),
    ("unknown fidelity", {"min_fidelity": "poetry"}, "min_fidelity"),
    ("inverted validity", {"time_from": NOW, "time_to": T0}, "time_from"),
    ("inverted event bounds", {"event_time_from": NOW, "event_time_to": T0}, "event_time_from"),
    ("multiplier too big", {"ranking_multipliers": {"lexical": 5.0}}, "lexical"),
    ("multiplier unknown", {"ranking_multipliers": {"vibes": 1.0}}, "vibes"),
    ("weights not summing", {"scoring": {"semantic": 0.9}}, "sum to 1"),
    ("unknown packing field", {"packing": {"colour": "red"}}, "colour"),
    ("unknown mode", {"retrieval_mode": "psychic"}, "retrieval_mode"),
]


@pytest.mark.parametrize("label,overrides,needle", BAD_ARGUMENTS, ids=[b[0] for b in BAD_ARGUMENTS])
def test_every_argument_is_validated_before_any_work(loaded, label, overrides, needle):
    args = {"query": "cat", "owner": "alice", "reference_time": NOW, **overrides}
    query = args.pop("query")
    with pytest.raises(InvalidInput, match=needle):
        loaded.retrieve(query, **args)
    assert _receipt_count(loaded) == 0


def test_multipliers_under_rank_fusion_are_refused(loaded):
    with pytest.raises(UnsupportedOperation, match="rrf"):
        loaded.retrieve("cat", owner="alice", scoring={"fusion": "rrf"}, ranking_multipliers={"lexical": 2.0})
    assert _receipt_count(loaded) == 0


def test_unity_multipliers_reproduce_the_baseline_bit_for_bit(loaded):
    base = loaded.retrieve("Alice phone Pixel", owner="alice", reference_time=NOW)
    unity = loaded.retrieve("Alice phone Pixel", owner="alice", reference_time=NOW, ranking_multipliers={})
    assert [(c.node_id, c.score) for c in unity.receipt.candidates] == [
        (c.node_id, c.score) for c in base.receipt.candidates
    ]
    assert unity.receipt.weight_sets == base.receipt.weight_sets
    assert unity.context == base.context
    assert unity.metadata.ranking_profile_status == "request_override"


def test_multipliers_adjust_applied_weights_renormalized_and_still_replay(loaded):
    response = loaded.retrieve(
        "Alice phone Pixel", owner="alice", reference_time=NOW, ranking_multipliers={"lexical": 4.0, "semantic": 0.25}
    )
    applied = response.receipt.weight_sets[0]
    base = response.receipt.scoring
    assert applied.lexical / applied.semantic == pytest.approx(16 * base.lexical / base.semantic)
    assert sum(applied.vector()) == pytest.approx(1.0, abs=1e-9)
    assert response.receipt.execution.parameters["ranking_multipliers"]["lexical"] == 4.0
    response.receipt.validate()
    zero = loaded.retrieve(
        "Alice phone",
        owner="alice",
        reference_time=NOW,
        scoring={"graph": 0.0, "confidence": 0.35},
        ranking_multipliers={"graph": 4.0},
    )
    assert zero.receipt.weight_sets[0].graph == 0.0


def test_receipt_is_unchanged_after_supersede_and_archive_of_a_returned_node(loaded):
    response = loaded.retrieve("Miso salmon", owner="alice", reference_time=NOW)
    before = receipt_bytes(loaded.get_receipt(response.metadata.request_id, "alice"))
    first, second = response.results[0].node_id, response.results[1].node_id
    loaded.supersede("alice", first, "Alice: Miso now eats chicken")
    loaded.archive("alice", second)
    after = loaded.get_receipt(response.metadata.request_id, "alice")
    assert receipt_bytes(after) == before
    after.validate()


def test_foreign_or_missing_request_id_reads_as_no_receipt(loaded):
    response = loaded.retrieve("cat", owner="alice", reference_time=NOW)
    assert loaded.get_receipt(response.metadata.request_id, "bob") is None
    assert loaded.get_receipt("00000000-0000-0000-0000-000000000000", "alice") is None
    with pytest.raises(InvalidInput, match="request_id"):
        loaded.get_receipt("not-a-uuid", "alice")


def test_a_logging_failure_still_returns_results_with_receipt_persisted_false(loaded, monkeypatch):
    def broken(store, receipt):
        raise OSError("disk full")

    monkeypatch.setattr(pipeline_module, "persist_receipt", broken)
    response = loaded.retrieve("cat", owner="alice", reference_time=NOW)
    assert response.results and not response.metadata.receipt_persisted
    assert "disk full" in response.metadata.receipt_error and response.metadata.receipt_checksum is None
    assert loaded.get_receipt(response.metadata.request_id, "alice") is None


def test_scope_filter_excludes_other_scopes_and_cross_scope_hints_are_marked(loaded):
    personal = loaded.retrieve("launch moved March", owner="alice", scopes=["personal"], reference_time=NOW)
    assert all(r.scope == "personal" for r in personal.results)
    hinted = loaded.retrieve(
        "launch moved March", owner="alice", scopes=["personal"], reference_time=NOW, include_cross_scope=True
    )
    project = [r for r in hinted.results if r.scope == "project"]
    assert project and all(r.cross_scope for r in project)
    assert hinted.receipt.scopes == ("personal",)
    assert hinted.receipt.execution.parameters["include_cross_scope"] is True


def test_owners_never_see_each_others_memories(loaded):
    response = loaded.retrieve("Miso cat", owner="bob", reference_time=NOW)
    assert [r.content for r in response.results] == ["Bob's cat is called Miso too"]


def test_event_time_bounds_filter_candidates(loaded):
    response = loaded.retrieve(
        "Alice phone cat trip",
        owner="alice",
        reference_time=NOW,
        event_time_from=T0 + timedelta(days=50),
        event_time_to=T0 + timedelta(days=100),
    )
    assert response.results
    assert all(T0 + timedelta(days=50) <= r.event_time <= T0 + timedelta(days=100) for r in response.results)
    assert response.receipt.execution.parameters["event_time_from"] == "2024-02-20T00:00:00Z"


def test_validity_window_filters_candidates(client):
    client.store_batch(
        "alice",
        [
            {"content": "Alice works at Acme", "valid_from": T0, "valid_to": T0 + timedelta(days=100)},
            {"content": "Alice works at Globex", "valid_from": T0 + timedelta(days=100)},
        ],
    )
    later = client.retrieve(
        "where does Alice work", owner="alice", reference_time=NOW, time_from=T0 + timedelta(days=150), time_to=NOW
    )
    assert [r.content for r in later.results] == ["Alice works at Globex"]
    assert later.receipt.time_from == T0 + timedelta(days=150)


def test_current_state_query_redistributes_recency_within_the_available_weight(loaded):
    response = loaded.retrieve("What phone does Alice use now?", owner="alice", reference_time=NOW)
    applied, base = response.receipt.weight_sets[0], response.receipt.scoring
    assert applied.recency == pytest.approx(0.25)
    taken = (base.semantic + base.lexical) - (applied.semantic + applied.lexical)
    assert taken == pytest.approx(applied.recency - base.recency)
    assert response.receipt.execution.parameters["query_adjustment"]["kind"] == "current_state"


def test_current_update_is_recorded_as_an_explicit_operation_and_replays(loaded):
    response = loaded.retrieve("What phone does Alice use now?", owner="alice", reference_time=NOW)
    updated = [
        c for c in response.receipt.candidates if any(a.kind == "current_update" for a in c.provenance.adjustments)
    ]
    assert updated, "the newest candidate with update wording gets the current-update operation"
    assert all(1.0 < a.coefficient <= 2.0 for c in updated for a in c.provenance.adjustments)
    response.receipt.validate()


def test_session_neighbours_inherit_a_recorded_decay_and_replay(loaded):
    response = loaded.retrieve("adopted grey cat", owner="alice", reference_time=NOW)
    inherited = [
        c
        for c in response.receipt.candidates
        if c.provenance.adjustments and c.provenance.adjustments[-1].kind == "session_decay"
    ]
    assert inherited and response.receipt.ranking_policy == "score_id"
    for c in inherited:
        assert c.provenance.base_node_id != c.node_id and c.provenance.adjustments[-1].coefficient == 0.85
    response.receipt.validate()


def test_episode_routing_records_episode_decay_and_replays(loaded):
    response = loaded.retrieve(
        "Miso food", owner="alice", reference_time=NOW, packing={"episode_context_top_k": 2, "session_context_top_k": 0}
    )
    assert response.receipt.packing.episode_context_top_k == 2
    kinds = {a.kind for c in response.receipt.candidates for a in c.provenance.adjustments}
    assert "episode_decay" in kinds
    response.receipt.validate()


def test_reranker_blend_is_recorded_in_order_and_replays(store_url):
    with MemoryClient(store_url, reranker=TokenOverlapReranker()) as client:
        client.store_batch("alice", MEMORIES)
        response = client.retrieve(
            "Miso salmon food", owner="alice", reference_time=NOW, packing={"session_context_top_k": 0}
        )
        receipt = response.receipt
        assert receipt.ranking_policy == "reranked_prefix"
        blended = [c for c in receipt.candidates if c.reranker_score is not None]
        assert blended and all(c.provenance.adjustments[-1].kind == "neural_blend" for c in blended)
        assert receipt.execution.features["reranker"]["provider"] == "prme.overlap"
        receipt.validate()


def test_rank_fusion_receipts_replay_from_recorded_ranks(loaded):
    response = loaded.retrieve("Alice cat Miso", owner="alice", reference_time=NOW, scoring={"fusion": "rrf"})
    receipt = response.receipt
    assert all(c.provenance.formula_version == 2 for c in receipt.candidates)
    assert receipt.candidates[0].provenance.rank_fusion is not None
    receipt.validate()


def test_execution_descriptor_records_parameters_and_feature_identity(loaded):
    execution = loaded.retrieve("cat", owner="alice", reference_time=NOW).receipt.execution
    features = execution.features
    assert features["embedding"]["provider"] == "prme.hashed" and features["embedding"]["dimension"] == 384
    assert features["storage"]["backend"] == loaded.store.backend
    assert features["lexical"]["backend"] == "bm25s" and features["tokenizer"]["tokenizer"] == "prme-regex-v1"
    assert set(features["source_sha256"]) >= {"formula", "scoring", "packing", "rendering", "pipeline"}
    assert execution.parameters["ranking_profile"] == {"status": "none"}


def test_receipts_survive_close_and_reopen(store_url):
    with MemoryClient(store_url) as first:
        first.store_batch("alice", MEMORIES)
        response = first.retrieve("cat", owner="alice", reference_time=NOW)
    with MemoryClient(store_url) as second:
        assert second.get_receipt(response.metadata.request_id, "alice") == response.receipt


def test_new_memories_are_visible_to_the_next_retrieval(client):
    client.store_memory("alice", "Alice plays the cello")
    assert client.retrieve("cello", owner="alice").results[0].content == "Alice plays the cello"
    client.store_memory("alice", "Alice also plays the violin")
    assert "Alice also plays the violin" in [r.content for r in client.retrieve("violin", owner="alice").results]


def test_retrieval_over_an_empty_store_returns_an_empty_replayable_receipt(client):
    response = client.retrieve("anything", owner="nobody")
    assert response.results == () and response.context == ""
    assert response.metadata.receipt_persisted
    response.receipt.validate()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("all", {"observed", "asserted", "hypothetical"}),
        ("reliable", {"observed", "asserted"}),
        ("observed", {"observed"}),
    ],
)
def test_epistemic_mode_limits_what_may_be_returned_and_is_recorded(client, mode, expected):
    for kind in ("observed", "asserted", "hypothetical"):
        client.store_memory("alice", {"content": f"Alice's bicycle is red ({kind} note)", "epistemic_type": kind})
    response = client.retrieve("Alice bicycle red", owner="alice", reference_time=NOW, epistemic_mode=mode)
    found = {r.content.split("(")[1].split(" ")[0] for r in response.results}
    assert found == expected
    parameters = response.receipt.execution.parameters
    assert parameters.get("epistemic_mode") == (None if mode == "all" else mode)


def test_an_unknown_epistemic_mode_is_refused_naming_the_field(client):
    with pytest.raises(InvalidInput, match="epistemic_mode"):
        client.retrieve("bicycle", owner="alice", reference_time=NOW, epistemic_mode="certain")
