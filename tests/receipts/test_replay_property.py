"""Property: over random stores, queries, configurations and multipliers, every new receipt
replays to exactly its recorded scores and order, and unity multipliers equal the baseline."""

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prme_core import MemoryClient
from prme_core.receipts.store import receipt_bytes
from prme_core.retrieval.reranker import TokenOverlapReranker

T0 = datetime(2023, 1, 1, tzinfo=UTC)
VOCAB = [
    "alice",
    "bob",
    "cat",
    "miso",
    "tea",
    "phone",
    "pixel",
    "switched",
    "now",
    "lisbon",
    "piano",
    "trip",
    "kyoto",
    "may",
    "2024",
    "hiking",
    "alps",
    "salmon",
    "food",
    "sister",
    "updated",
    "currently",
    "when",
    "yesterday",
    "recently",
    "moved",
    "replaced",
    "who",
    "is",
    "what",
    "does",
]

words = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=10).map(" ".join)
memory = st.fixed_dictionaries(
    {
        "content": words,
        "node_type": st.sampled_from(["fact", "note", "event", "preference", "instruction", "summary"]),
        "scope": st.sampled_from(["personal", "project"]),
        "session_id": st.none() | st.sampled_from(["s1", "s2", "s3"]),
        "event_time": st.none() | st.integers(0, 500).map(lambda d: T0 + timedelta(days=d)),
        "salience": st.floats(0, 1),
        "confidence": st.floats(0, 1),
        "epistemic_type": st.sampled_from(
            ["observed", "asserted", "inferred", "hypothetical", "conditional", "unverified"]
        ),
    }
)


@st.composite
def scoring(draw):
    raw = [draw(st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0])) for _ in range(6)]
    if sum(raw) == 0:
        raw[0] = 1.0
    total = sum(raw)
    keys = ("semantic", "lexical", "graph", "recency", "salience", "confidence")
    weights = dict(zip(keys, [r / total for r in raw]))
    weights["confidence"] = 1.0 - sum(weights[k] for k in keys[:5])
    weights["confidence"] = max(weights["confidence"], 0.0)
    weights["fusion"] = draw(st.sampled_from(["weighted", "weighted", "rrf"]))
    weights["relevance_floor"] = draw(st.sampled_from([0.0, 0.35]))
    weights["current_update_multiplier"] = draw(st.sampled_from([1.0, 1.3, 2.0]))
    return weights


packing = st.fixed_dictionaries(
    {
        "token_budget": st.sampled_from([16, 64, 300, 2048]),
        "multipath_ordering": st.sampled_from(["density", "score", "balanced"]),
        "context_format": st.sampled_from(["auditable", "compact"]),
        "context_guidance_mode": st.sampled_from(["off", "temporal", "all"]),
        "min_fidelity": st.sampled_from(["full", "prose", "reference"]),
        "session_context_top_k": st.sampled_from([0, 3, 20]),
        "session_context_window": st.sampled_from([1, 3]),
        "episode_context_top_k": st.sampled_from([0, 0, 2]),
    }
)
multipliers = st.none() | st.dictionaries(
    st.sampled_from(["semantic", "lexical", "graph", "recency", "salience", "confidence"]),
    st.floats(0.25, 4.0),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    memories=st.lists(memory, min_size=0, max_size=25),
    edges=st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), max_size=8),
    queries=st.lists(words, min_size=1, max_size=3),
    score_cfg=scoring(),
    pack_cfg=packing,
    mult=multipliers,
    rerank=st.booleans(),
    limit=st.integers(1, 30),
    min_score=st.sampled_from([0.0, 0.0, 0.2]),
    cross=st.booleans(),
)
def test_every_new_receipt_replays_and_unity_equals_baseline(
    memories, edges, queries, score_cfg, pack_cfg, mult, rerank, limit, min_score, cross
):
    with MemoryClient("duckdb:///:memory:", reranker=TokenOverlapReranker() if rerank else None) as client:
        nodes = client.store_batch("alice", memories) if memories else []
        for a, b in edges:
            if a < len(nodes) and b < len(nodes) and a != b:
                client.link("alice", nodes[a].id, nodes[b].id, "relates_to", weight=0.5)
        reference = T0 + timedelta(days=600)
        if score_cfg["fusion"] == "rrf":
            mult = None
        for query in queries:
            args = dict(
                owner="alice",
                scopes=["personal"],
                reference_time=reference,
                limit=limit,
                min_score=min_score,
                scoring=score_cfg,
                packing=pack_cfg,
                include_cross_scope=cross,
            )
            response = client.retrieve(query, ranking_multipliers=mult, **args)
            receipt = response.receipt
            receipt.validate()
            replay = receipt.replay_ranking()
            assert replay.order == tuple(c.node_id for c in receipt.candidates)
            assert replay.scores == tuple(c.score for c in receipt.candidates)
            stored = client.get_receipt(response.metadata.request_id, "alice")
            assert receipt_bytes(stored) == receipt_bytes(receipt)
            baseline = client.retrieve(query, **args)
            unity = client.retrieve(query, ranking_multipliers={}, **args)
            assert [(c.node_id, c.score) for c in unity.receipt.candidates] == [
                (c.node_id, c.score) for c in baseline.receipt.candidates
            ]
            assert unity.context == baseline.context
