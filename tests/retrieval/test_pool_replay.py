"""Schema versions 10 and 11: interaction features, the recorded candidate pool and pool replay.

Version 10 recorded the pool inline (kept readable: the golden fixture); version 11, what new
receipts use, records a summary bound by digest to the pool's packed columns.

The property test is the contract of pool replay: on a real store (both backends) with a small
conversational corpus in sessions, re-ranking a complete recorded pool under other admissible
weights returns exactly what a fresh retrieval under those weights returns over the same memory.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from prme_core import MemoryClient
from prme_core.canonical import canonical_json, sha256_hex
from prme_core.errors import CorruptRecord, ReplayUnavailable
from prme_core.learning.fit import proposed_scores
from prme_core.learning.observations import prepare
from prme_core.learning.snapshot import snapshot_from_receipts
from prme_core.learning.synthetic import synthetic_record
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.pool import PoolColumns
from prme_core.receipts.store import get_receipt, parse_receipt, persist_receipt, receipt_bytes
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.interaction import QueryTerms, name_terms
from prme_core.retrieval.pool_replay import check_pool_replay, replay_pool
from prme_core.retrieval.reranker import TokenOverlapReranker
from tests.fixtures.receipts import make_fixtures as mf

T0 = datetime(2023, 5, 1, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=120)
SIX = ("semantic", "lexical", "graph", "recency", "salience", "confidence")

SESSIONS = [
    [
        "Alice: I adopted a grey cat named Miso last spring",
        "Bob: Miso sounds lovely, what does she eat?",
        "Alice: Miso eats salmon and refuses dry food",
        "Bob: My dog Rex only eats dry food",
        "Alice: Rex and Miso should meet some day",
        "Bob: Maybe at the park near the lake",
    ],
    [
        "Bob: I started piano lessons in Lisbon",
        "Alice: My sister teaches piano in Lisbon too",
        "Bob: What is your sister's name?",
        "Alice: Her name is Clara and she loves jazz",
        "Bob: Clara should play at the festival",
        "Alice: The jazz festival is in July",
    ],
    [
        "Alice: I switched to a Pixel phone, the old iPhone broke",
        "Bob: Is the Pixel camera good?",
        "Alice: The camera is great for photos of Miso",
        "Bob: I still use an old Nokia phone",
        "Alice: I now use the Pixel for work calls too",
        "Bob: Updated: I replaced the Nokia with a Pixel",
    ],
    [
        "Alice: We hiked in the Alps in May",
        "Bob: The Alps trip was the best trip this year",
        "Alice: Next year we should hike in Kyoto",
        "Bob: Kyoto in spring has cherry blossoms",
    ],
]
QUERIES = [
    "What does Miso the cat eat?",
    "Who teaches piano in Lisbon?",
    "What phone does Alice currently use?",
    "What did Bob say recently about the Pixel?",
    "When did Alice and Bob hike in the Alps?",
    "What is the name of Alice's sister?",
    "Which dog eats dry food?",
    "jazz festival Clara",
]


def conversation() -> list[dict]:
    items = []
    for s, turns in enumerate(SESSIONS):
        for t, text in enumerate(turns):
            items.append(
                {
                    "content": text,
                    "session_id": f"conv-{s}",
                    "event_time": T0 + timedelta(days=10 * s, minutes=t),
                    "scope": "project" if (s, t) == (1, 3) else "personal",
                }
            )
    return items


@st.composite
def admissible_weights(draw):
    raw = [draw(st.integers(0, 10)) for _ in SIX]
    if not any(raw):
        raw[0] = 1
    total = sum(raw)
    six = [r / total for r in raw]
    six[-1] = max(1.0 - sum(six[:-1]), 0.0)
    return {
        **dict(zip(SIX, six)),
        "term_coverage": draw(st.sampled_from([0.0, 0.05, 0.2, 0.5])),
        "bigram_overlap": draw(st.sampled_from([0.0, 0.1, 0.35])),
        "entity_match": draw(st.sampled_from([0.0, 0.15, 0.5])),
        "temporal_boost": draw(st.sampled_from([0.0, 0.15, 0.6])),
        "relevance_floor": draw(st.sampled_from([0.0, 0.35, 0.7])),
        "current_update_multiplier": draw(st.sampled_from([1.0, 1.3, 2.0])),
    }


multipliers = st.none() | st.dictionaries(st.sampled_from(SIX), st.sampled_from([0.25, 0.5, 2.0, 4.0]), max_size=6)


@pytest.fixture
def conversation_client(store_url):
    with MemoryClient(store_url) as client:
        client.store_batch("alice", conversation())
        yield client


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    query=st.sampled_from(QUERIES),
    other=admissible_weights(),
    mult=multipliers,
    limit=st.integers(1, 12),
    min_score=st.sampled_from([0.0, 0.0, 0.25]),
    cross=st.booleans(),
    session_top_k=st.sampled_from([0, 3, 20]),
)
def test_pool_replay_under_other_weights_equals_a_fresh_retrieval(
    conversation_client, query, other, mult, limit, min_score, cross, session_top_k
):
    client = conversation_client
    args = dict(
        owner="alice",
        scopes=["personal"],
        reference_time=NOW,
        limit=limit,
        min_score=min_score,
        include_cross_scope=cross,
        packing={"session_context_top_k": session_top_k},
    )
    recorded = client.retrieve(query, **args).receipt
    assert recorded.schema_version == 11 and recorded.pool.complete and recorded.pool.replayable
    assert check_pool_replay(recorded)
    weights = ScoringWeights.model_validate({**recorded.scoring.model_dump(), **other})
    replayed = replay_pool(recorded, weights=weights, multipliers=mult)
    fresh = client.retrieve(query, scoring=weights, ranking_multipliers=mult, **args).receipt
    assert replayed.node_ids == tuple(c.node_id for c in fresh.candidates)
    assert replayed.scores == tuple(c.score for c in fresh.candidates)
    assert replayed.applied == fresh.weight_sets[0]


# --- what a version-11 receipt records ----------------------------------------------------------


def test_new_receipts_record_the_pool_without_text_and_bound_by_the_checksum(client):
    client.store_batch("alice", conversation())
    response = client.retrieve("What does Miso eat?", owner="alice", reference_time=NOW, limit=3)
    receipt = response.receipt
    pool, columns = receipt.pool, receipt.pool_columns()
    assert pool.size == response.metadata.candidate_pool_size and pool.depth == 250 and pool.complete
    assert columns.members == pool.members == pool.size > len(receipt.candidates)
    assert columns.has_neighbours and columns.neighbour_offsets.size == pool.size + 1  # every member's list
    text = receipt_bytes(receipt).decode()
    assert f'"sha256":"{pool.sha256}"' in text and '"features"' not in text.split('"pool":')[1].split("}")[0]
    packed = receipt.packed_pool()
    assert all(turn.encode() not in packed and turn not in text for s in SESSIONS for turn in s)
    stored, checksum = get_receipt(client.store, "alice", response.metadata.request_id)
    assert stored == receipt and checksum == sha256_hex(receipt_bytes(receipt))
    assert stored.pool_columns() is None  # read without its pool
    with pytest.raises(ReplayUnavailable, match="read it with its pool"):
        replay_pool(stored)
    with_pool = client.get_receipt(response.metadata.request_id, owner="alice", with_pool=True)
    assert with_pool.packed_pool() == packed and with_pool.pool_columns().node_ids == columns.node_ids
    assert check_pool_replay(with_pool)


def test_pool_depth_truncates_to_the_best_base_ranked_members_and_records_incompleteness(client):
    client.store_batch("alice", conversation())
    full = client.retrieve("Miso", owner="alice", reference_time=NOW, limit=3).receipt
    short = client.retrieve(
        "Miso", owner="alice", reference_time=NOW, limit=3, packing={"receipt_pool_depth": 2}
    ).receipt
    assert full.pool.size > 2 and short.pool.size == full.pool.size and not short.pool.complete
    assert short.pool_columns().node_ids == full.pool_columns().node_ids[:2]
    with pytest.raises(ReplayUnavailable, match="exact only for complete pools"):
        replay_pool(short)
    assert len(replay_pool(short, allow_incomplete=True).node_ids) <= 3
    none = client.retrieve("Miso", owner="alice", reference_time=NOW, limit=3, packing={"receipt_pool_depth": 0})
    assert none.receipt.pool.members == 0 and none.receipt.pool.depth == 0


def test_reranker_and_episode_routing_pools_are_recorded_but_not_replayable(store_url):
    with MemoryClient(store_url, reranker=TokenOverlapReranker()) as client:
        client.store_batch("alice", conversation())
        receipt = client.retrieve("Miso", owner="alice", reference_time=NOW).receipt
        assert receipt.pool.members and not receipt.pool.replayable and receipt.pool.reason == "neural_reranker"
        with pytest.raises(ReplayUnavailable, match="neural_reranker"):
            replay_pool(receipt)
    with MemoryClient(store_url) as client:
        receipt = client.retrieve(
            "Miso", owner="alice", reference_time=NOW, packing={"episode_context_top_k": 2}
        ).receipt
        assert receipt.pool.reason == "episode_routing"
        rrf = client.retrieve("Miso", owner="alice", reference_time=NOW, scoring={"fusion": "rrf"}).receipt
        assert rrf.pool.reason == "rank_fusion"


def test_pool_replay_refuses_weights_that_change_recorded_features():
    receipt = mf.receipt_v10()
    with pytest.raises(ReplayUnavailable, match="recency_lambda"):
        replay_pool(receipt, weights=receipt.scoring.model_copy(update={"recency_lambda": 0.5}))
    with pytest.raises(ReplayUnavailable, match="node_type_boosts"):
        replay_pool(receipt, weights=receipt.scoring.model_copy(update={"node_type_boosts": {}}))


@pytest.mark.parametrize("version", [10, 11])
def test_golden_pool_replays_to_its_returned_list_and_moves_under_other_weights(version):
    receipt = RetrievalReceipt.model_validate_json(mf.golden_bytes()[mf.fixture_name(version)])
    if version == 11:
        receipt.attach_pool(mf.golden_bytes()[mf.POOL_FIXTURE])
    assert check_pool_replay(receipt)
    lexical_only = ScoringWeights.model_validate(
        {
            **receipt.scoring.model_dump(),
            **dict.fromkeys(SIX, 0.0),
            "lexical": 1.0,
            "term_coverage": 0.0,
            "bigram_overlap": 0.0,
            "entity_match": 0.0,
        }
    )
    moved = replay_pool(receipt, weights=lexical_only)
    assert moved.scores != tuple(c.score for c in receipt.candidates)


def test_version_9_receipts_carry_no_pool_and_cannot_be_pool_replayed():
    v9 = RetrievalReceipt.model_validate_json(mf.golden_bytes()[mf.fixture_name(9)])
    assert v9.pool is None and b'"pool"' not in receipt_bytes(v9)
    assert all(not c.provenance.trace.has_interactions() for c in v9.candidates)
    with pytest.raises(ReplayUnavailable, match="version 10"):
        replay_pool(v9)


# --- fail closed --------------------------------------------------------------------------------


def v10_dict() -> dict:
    return orjson.loads(mf.golden_bytes()[mf.fixture_name(10)])


def v11_dict() -> dict:
    return orjson.loads(mf.golden_bytes()[mf.fixture_name(11)])


def golden_pool() -> bytes:
    return mf.golden_bytes()[mf.POOL_FIXTURE]


def load(data: dict) -> RetrievalReceipt:
    return RetrievalReceipt.model_validate_json(canonical_json(data))


def test_a_changed_pool_feature_fails_the_stored_checksum(open_store_at):
    store = open_store_at()
    stored = persist_receipt(store, mf.receipt_v10())
    data = v10_dict()
    data["pool"]["features"][2][0] = 0.31  # a member's semantic feature
    tampered = dataclasses.replace(stored, payload=canonical_json(data).decode())
    with pytest.raises(CorruptRecord):
        parse_receipt(tampered, stored.owner)


def test_a_changed_pool_feature_of_a_returned_candidate_is_rejected_by_the_model():
    data = v10_dict()
    data["pool"]["features"][0][9] = 0.25  # term coverage of the top member, which is returned
    with pytest.raises(ValidationError, match="trace features differ from pool member"):
        load(data)


@pytest.mark.parametrize(
    "field",
    [
        "depth",
        "size",
        "complete",
        "replayable",
        "current_state",
        "episodic",
        "node_ids",
        "features",
        "paths",
        "cross_scope",
        "update_eligible",
        "neighbours",
        "outside_ids",
        "outside_cross_scope",
    ],
)
def test_a_pool_missing_a_field_is_rejected(field):
    data = v10_dict()
    del data["pool"][field]
    with pytest.raises(ValidationError, match=f"must record {field} explicitly"):
        load(data)


def test_a_version_10_receipt_without_a_pool_is_rejected():
    data = v10_dict()
    del data["pool"]
    with pytest.raises(ValidationError, match="record the scored candidate pool"):
        load(data)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p.update(complete=False), "pool.complete"),
        (lambda p: p.update(size=5), "min\\(size, depth\\) members"),
        (lambda p: p.update(depth=3), "min\\(size, depth\\) members|pool.complete"),
        (lambda p: p["features"][1].pop(), "records 12 features"),
        (lambda p: p["neighbours"].__setitem__(0, [0]), "does not exist"),
        (lambda p: p.update(outside_ids=[]), "does not exist"),
        (lambda p: p.update(replayable=False), "reason exactly when"),
        (lambda p: p.update(cross_scope=[2, 2]), "sorted unique"),
        (lambda p: p["features"][3].__setitem__(11, 1.5), "\\[0, 1\\]"),
    ],
)
def test_an_inconsistent_pool_is_rejected(edit, message):
    data = v10_dict()
    edit(data["pool"])
    with pytest.raises(ValidationError, match=message):
        load(data)


def test_a_version_9_receipt_with_a_pool_or_interaction_traces_is_rejected():
    v9 = orjson.loads(mf.golden_bytes()[mf.fixture_name(9)])
    with pytest.raises(ValidationError, match="candidate pool requires a version 10 receipt"):
        load({**v9, "pool": v10_dict()["pool"]})
    wide = orjson.loads(canonical_json(v9))
    trace = wide["candidates"][0]["provenance"]["trace"]
    wide["candidates"][0]["provenance"]["trace"] = [*trace[:9], 0.5, 0.0, 0.0, *trace[9:]]
    with pytest.raises(ValidationError, match="holds 11 numbers"):
        load(wide)


# --- version 11: the summary and the packed pool fail closed ------------------------------------


def test_a_changed_or_missing_packed_pool_fails_closed_when_read(open_store_at):
    store = open_store_at()
    for edit, message in ((lambda b: b[:-1] + bytes([b[-1] ^ 1]), "does not match"), (lambda b: None, "missing")):
        receipt = mf.receipt_v11().model_copy(update={"request_id": uuid4()})
        receipt = RetrievalReceipt.build(**{**dict(receipt), "packed_pool": golden_pool()})
        receipt._pool_packed = edit(golden_pool())
        persist_receipt(store, receipt)
        assert get_receipt(store, receipt.owner, receipt.request_id) is not None  # the receipt itself is intact
        with pytest.raises(CorruptRecord, match=message):
            get_receipt(store, receipt.owner, receipt.request_id, with_pool=True)


@pytest.mark.parametrize(
    "field", ["depth", "size", "complete", "replayable", "current_state", "episodic", "members", "outside", "sha256"]
)
def test_a_pool_summary_missing_a_field_is_rejected(field):
    data = v11_dict()
    del data["pool"][field]
    with pytest.raises(ValidationError, match=f"must record {field} explicitly"):
        load(data)


def test_each_version_records_its_own_pool_form():
    with pytest.raises(ValidationError, match="records its pool as a summary"):
        load({**v11_dict(), "pool": v10_dict()["pool"]})
    with pytest.raises(ValidationError, match="records its pool as inline arrays"):
        load({**v10_dict(), "pool": v11_dict()["pool"]})
    with pytest.raises(ValidationError, match="projection_sha256 does not match"):
        load({**v11_dict(), "pool": {**v11_dict()["pool"], "sha256": "0" * 64}})  # the projection binds the digest


def test_a_packed_pool_that_differs_from_the_receipt_is_not_attached():
    receipt = RetrievalReceipt.model_validate_json(mf.golden_bytes()[mf.fixture_name(11)])
    flipped = bytearray(golden_pool())
    flipped[-1] ^= 1
    with pytest.raises(ValueError, match="does not match the digest"):
        receipt.attach_pool(bytes(flipped))
    assert receipt.pool_columns() is None


def _packed(**changes) -> bytes:
    columns = PoolColumns.unpack(golden_pool())
    return dataclasses.replace(columns, **changes).pack()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (lambda: golden_pool()[:-3], "truncated"),
        (lambda: golden_pool() + b"\0", "bytes past its last block"),
        (lambda: b"\x02\0\0\0{}" + golden_pool()[6:], "header"),
        (lambda: _packed(neighbour_refs=np.array([7])), "does not exist"),
        (lambda: _packed(neighbour_refs=np.array([0])), "does not exist"),
        (lambda: _packed(paths=np.array([3, 3, 2, 9], dtype=np.uint8)), "1..7"),
        (
            lambda: _packed(features=np.where(np.eye(4, 12, 11) == 1, 1.5, PoolColumns.unpack(golden_pool()).features)),
            "\\[0, 1\\]",
        ),
        (lambda: _packed(outside_bytes=b"", outside_cross_scope=np.zeros(0, dtype=bool)), "does not exist"),
        (lambda: _packed(node_bytes=mf.node(1).bytes * 4), "distinct nodes"),
    ],
)
def test_an_inconsistent_packed_pool_is_rejected(data, message):
    with pytest.raises(ValueError, match=message):
        PoolColumns.unpack(data())


def _changed_features(columns: PoolColumns) -> PoolColumns:
    features = columns.features.copy()
    features[0, 9] = 0.25  # term coverage of the top member, which is returned
    return dataclasses.replace(columns, features=features)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_changed_features, "trace features differ from pool member"),
        (lambda c: dataclasses.replace(c, replay={**c.replay, "limit": 4}), "replay context disagrees"),
    ],
)
def test_a_packed_pool_that_disagrees_with_its_receipt_is_rejected_at_build(change, message):
    packed = change(PoolColumns.unpack(golden_pool())).pack()
    fields = dict(mf.receipt_v11())
    fields.pop("projection_sha256")
    fields["pool"] = fields["pool"].model_copy(update={"sha256": sha256_hex(packed)})
    with pytest.raises(ValueError, match=message):
        RetrievalReceipt.build(**fields, packed_pool=packed)


# --- interaction features -----------------------------------------------------------------------


def test_interaction_features_are_shares_of_query_terms_bigrams_and_names(client):
    client.store_batch(
        "alice", [{"content": "Alice: I adopted a grey cat named Miso"}, {"content": "Bob: a cat named Rex"}]
    )
    receipt = client.retrieve("Is the cat named Miso Alice's?", owner="alice", reference_time=NOW).receipt
    traces = {c.content_sha256: c.provenance.trace for c in receipt.candidates}
    first = traces[sha256_hex("Alice: I adopted a grey cat named Miso")]
    second = traces[sha256_hex("Bob: a cat named Rex")]
    # query terms {cat, named, miso, alice}; bigrams (cat,named) (named,miso) (miso,alice); names {miso, alice}
    assert (first.term_coverage, first.bigram_overlap, first.entity_match) == (1.0, 2 / 3, 1.0)
    assert (second.term_coverage, second.bigram_overlap, second.entity_match) == (0.5, 1 / 3, 0.0)


def test_name_like_terms_skip_sentence_starts_and_stopwords():
    assert name_terms("What did Caroline tell Melanie? When did She go to Paris") == {"caroline", "melanie", "paris"}
    assert name_terms("who is alice") == frozenset()
    assert QueryTerms("the and of").terms == frozenset()


def test_zero_interaction_weights_score_exactly_as_without_the_features(client):
    client.store_batch("alice", conversation())
    receipt = client.retrieve("What does Miso eat?", owner="alice", reference_time=NOW).receipt
    assert any(c.provenance.trace.has_interactions() for c in receipt.candidates)
    from prme_core.retrieval.formula import weighted_base_scores

    feats = np.array([c.provenance.trace.feature_row()[:9] for c in receipt.candidates])
    w = receipt.weight_sets[0]
    old = weighted_base_scores(
        feats, np.tile(w.vector(), (len(feats), 1)), np.tile([w.temporal_boost, w.relevance_floor], (len(feats), 1))
    )
    assert old.tolist() == [c.provenance.trace.base_score for c in receipt.candidates]


# --- learning reads both versions ---------------------------------------------------------------


def test_the_learner_reproduces_recorded_scores_of_version_9_and_version_10_receipts_at_unity():
    rng = random.Random(5)
    receipts = [mf.receipt_v9(), mf.receipt_v10()]
    records = []
    for receipt in receipts:
        ids = [c.node_id for c in receipt.candidates]
        records.append(synthetic_record(rng, receipt, {ids[0]}))
    snapshot = snapshot_from_receipts("alice", [(r, sha256_hex(receipt_bytes(r))) for r in receipts], records)
    prepared = prepare(snapshot, owner="alice", scopes=["personal"])
    judged = prepared.judged
    assert len(prepared.requests) == 2 and judged.features.shape[1] == 12 and judged.weights.shape[1] == 9
    assert np.array_equal(proposed_scores(judged, np.ones(6)), judged.recorded)


def test_a_profile_fitted_under_the_version_9_layout_is_reported_inapplicable(client):
    """The feature identity names the scorer's trace layout (and its source files), so a profile
    whose identity was observed under layout 1 is inapplicable with a reason, never applied."""
    import uuid

    from prme_core.features import layout_for
    from prme_core.profiles.model import RankingProfileApplication, RankingProfileState
    from prme_core.profiles.registry import record_change
    from prme_core.retrieval.execution import feature_identity_sha256
    from prme_core.retrieval.multipliers import RankingMultipliers
    from prme_core.types import utc_now

    features = client.pipeline.features_for_request()
    assert features["trace_layout"] == list(layout_for(10).trace_fields)
    old_identity = feature_identity_sha256({**features, "trace_layout": list(layout_for(9).trace_fields)})
    client.store_batch("alice", conversation())
    scopes = tuple(sorted(client.settings.scopes))
    profile_id = uuid.uuid4()
    app = RankingProfileApplication(
        profile_id=profile_id,
        multipliers=RankingMultipliers(lexical=2.0),
        feature_identity_sha256=old_identity,
        base_scoring=client.settings.scoring,
    )
    state = RankingProfileState(
        change_id=uuid.uuid4(),
        owner="alice",
        scopes=scopes,
        action="activate",
        previous_profile_id=None,
        active_profile_id=profile_id,
        application=app,
        changed_at=utc_now(),
    )
    with client.store.transaction() as tx:
        record_change(tx, state)
    meta = client.retrieve("Miso", owner="alice", reference_time=NOW).metadata
    assert (meta.ranking_profile_status, meta.ranking_profile_reason) == ("inapplicable", "feature_identity_mismatch")
