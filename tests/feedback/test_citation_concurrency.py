"""Concurrent retries of one citation id (issue 13, item 10): every acknowledged write returns
exactly the stored record. Processes on PostgreSQL; on DuckDB, threads with their own stores on
one file, processes taking turns on it, and a store inherited through fork (refused)."""

import multiprocessing
import queue
import threading
import uuid
from datetime import UTC, datetime

import pytest

from prme_core import MemoryClient
from prme_core.canonical import sha256_hex
from prme_core.errors import StoreUnavailable
from prme_core.feedback.citations import OP_CITATIONS, AnswerCitationRecord
from prme_core.storage.keyed_records import record_operation_id

NOW = datetime(2024, 6, 1, tzinfo=UTC)
OWNER = "alice"
WRITERS, ROUNDS = 8, 10
WAIT_S = 120


def _saved_retrieval(client: MemoryClient) -> tuple[str, str]:
    client.store_batch(OWNER, ["Alice: cat Miso", "Alice: dog Rex"])
    response = client.retrieve("cat", owner=OWNER, reference_time=NOW)
    return str(response.metadata.request_id), str(response.results[0].node_id)


def _record(client: MemoryClient, request_id: str, node_id: str, citation_id: str) -> AnswerCitationRecord:
    return client.record_answer_citations(
        request_id,
        owner=OWNER,
        answer_id="answer-1",
        cited_node_ids=[node_id],
        method="model_reported",
        citation_id=citation_id,
    )


def _record_rounds(client, request_id, node_id, citation_ids, start, out) -> None:
    for round_, citation_id in enumerate(citation_ids):
        if start is not None:
            start.wait(WAIT_S)
        try:
            out.put((round_, "ok", _record(client, request_id, node_id, citation_id).model_dump_json()))
        except Exception as exc:  # noqa: BLE001 - asserted by the parent
            out.put((round_, "error", repr(exc)))


def _writer_process(url, request_id, node_id, citation_ids, start, out) -> None:
    with MemoryClient(url) as client:
        _record_rounds(client, request_id, node_id, citation_ids, start, out)


def _assert_every_ack_is_the_stored_record(client: MemoryClient, citation_ids: list[str], acks: list[tuple]) -> None:
    assert [a for a in acks if a[1] != "ok"] == []
    for round_, citation_id in enumerate(citation_ids):
        with client.store.transaction(read_only=True) as tx:
            op = tx.get_operation(OWNER, record_operation_id("answer-citations", OWNER, uuid.UUID(citation_id)))
            stored_rows = [o for o in tx.list_operations(OWNER, OP_CITATIONS, limit=1000) if o.target_id == citation_id]
        assert op is not None and len(stored_rows) == 1
        stored = client.get_answer_citations(uuid.UUID(citation_id), OWNER)
        returned = [AnswerCitationRecord.model_validate_json(a[2]) for a in acks if a[0] == round_]
        assert returned, f"round {round_} acknowledged nothing"
        for record in returned:
            assert record == stored and record.recorded_at == stored.recorded_at
            assert sha256_hex(record.canonical_bytes()) == op.checksum


def _drain(out, count: int) -> list[tuple]:
    return [out.get(timeout=WAIT_S) for _ in range(count)]


def test_concurrent_retries_of_one_citation_id_all_return_the_stored_record(store_url):
    citation_ids = [str(uuid.uuid4()) for _ in range(ROUNDS)]
    with MemoryClient(store_url) as client:
        request_id, node_id = _saved_retrieval(client)
        if store_url.startswith("postgresql"):
            ctx = multiprocessing.get_context("spawn")
            start, out = ctx.Barrier(WRITERS), ctx.Queue()
            workers = [
                ctx.Process(target=_writer_process, args=(store_url, request_id, node_id, citation_ids, start, out))
                for _ in range(WRITERS)
            ]
            opened = []
        else:  # threads, each with its own store on the file (DuckDB shares one database between them)
            start, out = threading.Barrier(WRITERS), queue.Queue()
            opened = [MemoryClient(store_url) for _ in range(WRITERS)]
            workers = [
                threading.Thread(target=_record_rounds, args=(c, request_id, node_id, citation_ids, start, out))
                for c in opened
            ]
        for w in workers:
            w.start()
        acks = _drain(out, WRITERS * ROUNDS)
        for w in workers:
            w.join(WAIT_S)
        for c in opened:
            c.close()
        _assert_every_ack_is_the_stored_record(client, citation_ids, acks)


def test_duckdb_processes_taking_turns_on_one_file_all_return_the_stored_record(tmp_path):
    url = f"duckdb:///{tmp_path / 'prme.duckdb'}?lock_timeout=120"
    citation_ids = [str(uuid.uuid4())]
    with MemoryClient(url) as client:
        request_id, node_id = _saved_retrieval(client)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    workers = [
        ctx.Process(target=_writer_process, args=(url, request_id, node_id, citation_ids, None, out)) for _ in range(4)
    ]
    for w in workers:
        w.start()
    acks = _drain(out, len(workers))
    for w in workers:
        w.join(WAIT_S)
    with MemoryClient(url) as client:
        _assert_every_ack_is_the_stored_record(client, citation_ids, acks)


def _use_inherited_store(client, request_id, node_id, citation_id, out) -> None:
    try:
        _record(client, request_id, node_id, citation_id)
        out.put("acknowledged")
    except StoreUnavailable as exc:
        out.put(f"refused: {exc}")
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        out.put(f"error: {exc!r}")


def test_a_duckdb_store_inherited_through_fork_refuses_to_write(tmp_path):
    # A forked child holds a private copy of the database: it acknowledged records that the
    # parent's file then lost, so the same citation id came back with different recorded_at.
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("this platform cannot fork")
    url = f"duckdb:///{tmp_path / 'prme.duckdb'}"
    citation_id = str(uuid.uuid4())
    with MemoryClient(url) as client:
        request_id, node_id = _saved_retrieval(client)
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        children = [
            ctx.Process(target=_use_inherited_store, args=(client, request_id, node_id, citation_id, out))
            for _ in range(4)
        ]
        for child in children:
            child.start()
        outcomes = _drain(out, len(children))
        for child in children:
            child.join(WAIT_S)
        assert all(o.startswith("refused: ") and "open a new store in this process" in o for o in outcomes), outcomes
        ack = _record(client, request_id, node_id, citation_id)
    with MemoryClient(url) as reopened:
        _assert_every_ack_is_the_stored_record(reopened, [citation_id], [(0, "ok", ack.model_dump_json())])
