"""Large batches on both backends: written in bounded chunks, still one transaction.

DuckDB inserts a batch in statements of at most ``_INSERT_CHUNK_ROWS`` rows and about
``_INSERT_CHUNK_CHARS`` characters; PostgreSQL streams it through one COPY. Either way the
batch is all or nothing. (Memory figures live in ``benchmarks/batch_memory.py``, not here.)
"""

from __future__ import annotations

from uuid import UUID

import pytest

from prme_core import MemoryClient
from prme_core.errors import DuplicateKey
from prme_core.memory.models import MAX_CONTENT_BYTES
from prme_core.storage import duckdb_backend

ROWS_PER_CHUNK = duckdb_backend._INSERT_CHUNK_ROWS
CONTENTS_PER_CHUNK = duckdb_backend._INSERT_CHUNK_CHARS // MAX_CONTENT_BYTES


def _batch(shape: str) -> list[dict]:
    """More rows than one chunk holds ("rows"), or more text than one chunk holds ("text")."""
    if shape == "rows":
        return [{"content": f"memory {i} about tea", "id": UUID(int=i + 1)} for i in range(ROWS_PER_CHUNK + 501)]
    return [
        {"content": f"{i:08d}" + "x" * (MAX_CONTENT_BYTES - 8), "id": UUID(int=i + 1)}
        for i in range(CONTENTS_PER_CHUNK + 20)
    ]


def _versions(client: MemoryClient, owner: str) -> int:
    with client.store.transaction() as tx:
        return tx.conn.fetchall("SELECT count(*) FROM memory_node_versions WHERE owner = ?", [owner])[0][0]


@pytest.mark.parametrize("shape", ["rows", "text"])
def test_a_batch_larger_than_one_chunk_stores_every_memory_in_order(client, shape):
    items = _batch(shape)
    stored = client.store_batch("alice", items)
    read = list(client.iterate("alice", page_size=1000))
    assert read == stored
    assert [n.id for n in read] == [item["id"] for item in items]
    assert [n.content for n in read] == [item["content"] for item in items]
    assert _versions(client, "alice") == len(items)
    assert client.history("alice", items[-1]["id"]) == [stored[-1]]


@pytest.mark.parametrize("shape", ["rows", "text"])
@pytest.mark.parametrize("clash", ["first", "last"])
def test_a_failure_in_a_late_chunk_of_a_batch_writes_nothing(client, shape, clash):
    items = _batch(shape)
    # A stray version row for one of the batch's ids: the id check passes (it looks at
    # memory_nodes), every chunk of memory_nodes is written, then memory_node_versions hits the
    # stray row's primary key in its first or its last chunk.
    victim = items[0 if clash == "first" else -1]["id"]
    client.store_memory("alice", {"content": "a stray version", "id": victim})
    with client.store.transaction() as tx:
        tx.conn.execute("DELETE FROM memory_nodes WHERE owner = ? AND id = ?", ["alice", str(victim)])
    with pytest.raises(DuplicateKey):
        client.store_batch("alice", items)
    assert client.scan("alice", include_inactive=True).items == ()
    assert _versions(client, "alice") == 1
    again = client.store_batch("alice", [item for item in items if item["id"] != victim])  # still usable
    assert len(list(client.iterate("alice", page_size=1000))) == len(again)


def test_a_failure_in_the_third_chunk_abandons_the_first_two_on_duckdb(tmp_path, monkeypatch):
    chunks: list[tuple[str, int]] = []
    real_insert_chunk = duckdb_backend._DuckConnection._insert_chunk

    def failing_third_chunk(self, table, columns, rows):
        chunks.append((table, len(rows)))
        if len(chunks) == 3:
            raise OSError("disk went away")
        real_insert_chunk(self, table, columns, rows)

    with MemoryClient(f"duckdb:///{tmp_path / 'prme.duckdb'}") as client:
        monkeypatch.setattr(duckdb_backend._DuckConnection, "_insert_chunk", failing_third_chunk)
        with pytest.raises(OSError, match="disk went away"):
            client.store_batch("alice", [f"memory {i}" for i in range(3 * ROWS_PER_CHUNK)])
        monkeypatch.undo()
        assert chunks == [("memory_nodes", ROWS_PER_CHUNK)] * 3
        assert client.scan("alice", include_inactive=True).items == ()
        assert _versions(client, "alice") == 0
        assert len(client.store_batch("alice", ["after the failure"])) == 1


def test_insert_chunks_keep_row_and_text_bounds_and_every_row_once():
    text = "y" * (duckdb_backend._INSERT_CHUNK_CHARS // 3 + 1)
    rows = [(i, "short") for i in range(ROWS_PER_CHUNK + 1)] + [(i, text) for i in range(7)]
    rows += [(0, "z" * (duckdb_backend._INSERT_CHUNK_CHARS + 1)), (1, "after")]
    chunks = list(duckdb_backend._insert_chunks(rows))
    assert [row for chunk in chunks for row in chunk] == rows
    for chunk in chunks:
        assert len(chunk) <= ROWS_PER_CHUNK
        assert len(chunk) == 1 or sum(len(r[1]) for r in chunk) <= duckdb_backend._INSERT_CHUNK_CHARS
    assert [len(c) for c in chunks] == [ROWS_PER_CHUNK, 3, 2, 2, 1, 1, 1]
