"""Receipt retention on both backends: the pools of old receipts without feedback are dropped,
labelled receipts stay whole, every compacted receipt still verifies and replays, and feedback on
a compacted receipt is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from prme_core.errors import InvalidInput, MissingEvidence
from prme_core.receipts.replay import check_replay
from prme_core.retrieval.pool_replay import check_pool_replay
from prme_core.types import utc_now

LATER = timedelta(days=31)


@pytest.fixture
def receipts(client):
    for i in range(12):
        client.store_memory("alice", f"alice's note {i} about bicycles and repair costs")
    responses = [client.retrieve(f"bicycle repair {i}", owner="alice") for i in range(6)]
    labelled, cited, *bare = responses
    ids = [r.node_id for r in labelled.results]
    client.record_relevance(
        labelled.metadata.request_id, {ids[0]: True, ids[1]: False}, owner="alice", method="explicit_user"
    )
    in_context = [c.node_id for c in cited.receipt.candidates if c.in_context and c.has_content]
    client.record_answer_citations(
        cited.metadata.request_id,
        owner="alice",
        answer_id="a1",
        cited_node_ids=in_context[:1],
        method="application_verified",
    )
    return labelled, cited, bare


def test_retention_drops_only_old_unlabelled_pools_and_every_receipt_still_verifies(client, receipts):
    labelled, cited, bare = receipts
    young = client.apply_receipt_retention(older_than=timedelta(days=30))
    assert young.receipts == 0 and young.bytes == 0  # nothing is old enough yet

    done = client.apply_receipt_retention(older_than=timedelta(days=30), now=utc_now() + LATER)
    assert done.compacted == {"alice": len(bare)} and done.bytes_dropped["alice"] > 0
    again = client.apply_receipt_retention(older_than=timedelta(days=30), now=utc_now() + LATER)
    assert again.receipts == 0  # a rerun finds nothing left to drop

    for kept in (labelled, cited):  # labelled receipts keep everything: the pool re-ranks exactly
        receipt = client.get_receipt(kept.metadata.request_id, "alice", with_pool=True)
        assert receipt == kept.receipt
        check_pool_replay(receipt)
    for response in bare:
        receipt = client.get_receipt(response.metadata.request_id, "alice")
        assert receipt == response.receipt  # checksum verified on read; the returned list is whole
        check_replay(receipt)
        with pytest.raises(MissingEvidence, match="retention window"):
            client.get_receipt(response.metadata.request_id, "alice", with_pool=True)

    target = bare[0]
    node = target.results[0].node_id
    with pytest.raises(InvalidInput, match="retention window") as refused:
        client.record_relevance(target.metadata.request_id, {node: True}, owner="alice", method="explicit_user")
    assert refused.value.field == "request_id"
    assert client.list_relevance("alice") and len(client.list_relevance("alice")) == 1


def test_retention_refuses_a_window_too_short_and_leaves_other_owners_alone(client, receipts):
    with pytest.raises(InvalidInput, match="older_than"):
        client.apply_receipt_retention(older_than=timedelta(minutes=5))
    client.store_memory("bob", "bob's bicycle")
    bob = client.retrieve("bicycle", owner="bob")
    done = client.apply_receipt_retention(older_than=timedelta(days=30), owners=["alice"], now=utc_now() + LATER)
    assert set(done.compacted) == {"alice"}
    check_pool_replay(client.get_receipt(bob.metadata.request_id, "bob", with_pool=True))
