"""The batched pool ranker learning uses equals pool replay (and so a fresh retrieval), on a real
store with sessions, over random admissible adjustments of both profile families."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prme_core import MemoryClient
from prme_core.learning.pool_ranking import PoolRequest, PoolSet, recorded_lists
from prme_core.retrieval.multipliers import RankingMultipliers
from prme_core.retrieval.pool_replay import replay_pool
from tests.retrieval.test_pool_replay import NOW, QUERIES, conversation

SIX = ("semantic", "lexical", "graph", "recency", "salience", "confidence")


@pytest.fixture(scope="module")
def receipts(tmp_path_factory):
    """Receipts of every test query under several request settings (limits, cut-offs,
    inheritance depth, cross-scope), from one DuckDB store."""
    path = tmp_path_factory.mktemp("pool-ranking") / "store.duckdb"
    out = []
    with MemoryClient(f"duckdb:///{path}") as client:
        client.store_batch("alice", conversation())
        for i, query in enumerate(QUERIES * 3):
            packing = {"session_context_top_k": (0, 3, 5, 20)[i % 4]}
            response = client.retrieve(
                query,
                owner="alice",
                scopes=["personal"],
                reference_time=NOW,
                limit=(3, 8, 20)[i % 3],
                min_score=(0.0, 0.0, 0.2)[i % 3],
                include_cross_scope=i % 2 == 1,
                packing=packing,
                ranking_multipliers={"lexical": 2.0} if i % 5 == 4 else None,
            )
            out.append(response.receipt)
    return out


def pool_set(receipts) -> PoolSet:
    return PoolSet([PoolRequest(r.pool_columns(), (), ()) for r in receipts])


adjustments = st.builds(
    lambda six, interactions: RankingMultipliers.from_vector(six, interactions),
    st.lists(st.sampled_from([0.25, 0.5, 0.8, 1.0, 1.6, 4.0]), min_size=6, max_size=6),
    st.none() | st.lists(st.sampled_from([0.0, 0.05, 0.2, 0.5]), min_size=3, max_size=3),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(adjustment=adjustments, shallow=st.booleans())
def test_batched_ranking_equals_pool_replay_of_every_receipt(receipts, adjustment, shallow):
    """``shallow``: only the limit-3 requests, so each evaluation sorts just the best few members
    of each pool (and adds back what inheritance lifts)."""
    chosen = [r for r in receipts if r.result_limit == 3] if shallow else receipts
    pools = pool_set(chosen)
    assert not shallow or pools._widest > 3
    for receipt, (ids, scores) in zip(chosen, recorded_lists(pools.rank(adjustment), pools), strict=True):
        replayed = replay_pool(receipt, multipliers=adjustment)
        assert ids == [n.bytes for n in replayed.node_ids]
        assert scores == list(replayed.scores)


def test_recorded_adjustments_reproduce_every_returned_list(receipts):
    pools = pool_set(receipts)
    for receipt, (ids, scores) in zip(receipts, recorded_lists(pools.rank(None, recorded=True), pools), strict=True):
        assert ids == [c.node_id.bytes for c in receipt.candidates]
        assert scores == [c.score for c in receipt.candidates]


def test_judged_metrics_score_positives_in_the_returned_list_and_explicit_pairs_only(receipts):
    receipt = next(r for r in receipts if len(r.candidates) >= 3)
    ids = [c.node_id.bytes for c in receipt.candidates]
    pools = PoolSet([PoolRequest(receipt.pool_columns(), (ids[1],), (ids[0],))])
    ndcg, accuracy = pools.judged_metrics(pools.rank(None, recorded=True), k=10)
    assert ndcg[0] == pytest.approx(1.0 / np.log2(3)) and accuracy[0] == 0.0


def test_a_label_outside_the_pool_is_refused(receipts):
    with pytest.raises(ValueError, match="neither a member"):
        PoolSet([PoolRequest(receipts[0].pool_columns(), (b"\0" * 16,), ())])
