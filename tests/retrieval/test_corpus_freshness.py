"""A long-lived client's retrievals see every committed memory, whatever order writers commit in
(issue 13, item 1): the corpus cache is keyed on a revision that changes with every commit."""

from datetime import UTC, datetime

import pytest

from benchmarks.corpus_freshness_stress import run_stress
from prme_core import MemoryClient
from prme_core.errors import IdempotencyConflict
from prme_core.memory.bank import MemoryBank
from prme_core.storage import open_store

NOW = datetime(2024, 6, 1, tzinfo=UTC)
OWNER = "alice"


def _retrieved(client: MemoryClient, query: str) -> set[str]:
    response = client.retrieve(query, owner=OWNER, reference_time=NOW, retrieval_mode="lexical")
    return {str(r.node_id) for r in response.results}


def _seq_of(client: MemoryClient) -> dict[str, int]:
    with client.store.transaction() as tx:
        rows = tx.scan_nodes(OWNER, scopes=None, lifecycles=None, after_seq=0, limit=1000)
    return {str(node.id): seq for seq, node in rows}


def test_a_memory_that_commits_after_a_higher_sequence_number_is_still_retrieved(postgres_url):
    with (
        MemoryClient(postgres_url) as reader,
        open_store(postgres_url) as slow_store,
        open_store(postgres_url) as fast_store,
    ):
        slow, fast = MemoryBank(slow_store, reader.settings), MemoryBank(fast_store, reader.settings)
        reader.store_memory(OWNER, "Alice: a seed memory so the reader has a cached corpus")
        assert _retrieved(reader, "seed")
        with slow_store.transaction():  # the slow writer draws the lower sequence number first...
            late = slow.store_one(OWNER, "Alice: slowwriter memory drawn first, committed last")
            early = fast.store_one(OWNER, "Alice: fastwriter memory drawn second, committed first")
            seen = _retrieved(reader, "slowwriter fastwriter")  # cached between the two commits
            assert str(early.id) in seen and str(late.id) not in seen
        # ...and commits after the fast one: the highest sequence number did not change.
        seqs = _seq_of(reader)
        assert seqs[str(late.id)] < seqs[str(early.id)]
        assert str(late.id) in _retrieved(reader, "slowwriter")


def _revision(client: MemoryClient, owner: str = OWNER) -> int:
    with client.store.transaction(read_only=True) as tx:
        return tx.memory_revision(owner)


def test_every_memory_write_moves_the_owners_revision_and_nothing_else_does(client):
    assert _revision(client) == 0
    first, second = client.store_batch(OWNER, ["Alice: cat Miso", "Alice: dog Rex"])
    moves = [_revision(client)]
    client.link(OWNER, first.id, second.id)
    moves.append(_revision(client))
    client.supersede(OWNER, first.id, "Alice: cat Miso, now twelve")
    moves.append(_revision(client))
    client.archive(OWNER, second.id)
    moves.append(_revision(client))
    assert moves == [1, 2, 3, 4]  # one bump per transaction, however many rows it wrote
    client.store_memory("bob", "Bob: no pets")
    response = client.retrieve("cat", owner=OWNER, reference_time=NOW)  # writes a receipt, not memory
    client.record_answer_citations(
        response.metadata.request_id, owner=OWNER, answer_id="a", cited_node_ids=[], method="model_reported"
    )
    with pytest.raises(IdempotencyConflict):
        client.store_batch(OWNER, ["Alice: kept out", {"content": "x", "id": str(first.id)}])  # refused: no write
    assert _revision(client) == 4 and _revision(client, "bob") == 1


def test_a_bounded_stress_run_misses_no_committed_memory(store_url):
    # Processes on PostgreSQL; threads with their own clients on DuckDB (one process per file).
    result = run_stress(store_url, rounds=30, writers=4, processes=store_url.startswith("postgresql"))
    assert result.errors == [] and result.rounds == 30
    assert (result.misses, result.corpus_misses) == (0, 0)
