"""Corpus freshness under concurrent writers (issue 13, item 1).

Writers (processes on PostgreSQL, threads with their own clients on DuckDB, whose file admits
one process) and one long-lived reader client. Each round every writer stores a small batch
holding one memory with a token no other memory has, in a transaction it keeps open a random
0..``--hold-ms`` after inserting (a slow commit: it widens the window in which writers commit
out of sequence order; 0 is the bare public API); the reader retrieves those tokens
throughout the round, so its corpus cache holds the intermediate states. Once every writer has
acknowledged (its transaction committed), the reader must retrieve every token memory, and its
corpus must hold every active node ``scan()`` then reads. Anything less is a miss. "Gaps" count retrievals that saw a memory while missing one with a lower sequence number
that committed later (the out-of-order window the cache must not freeze).

Run: ``python -m benchmarks.corpus_freshness_stress [--backend postgres] [--rounds 500] [--writers 4]``.
Target: 0 misses.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from benchmarks.common import bench_store_url, median, percentile, row
from prme_core import MemoryClient

NOW = datetime(2024, 6, 1, tzinfo=UTC)
OWNERS = 8  # rounds cycle through owners: the first rounds create them, later ones add to them
WAIT_S = 120.0


@dataclass
class StressResult:
    rounds: int = 0
    writes: int = 0
    misses: int = 0  # acknowledged token memories the final retrieval of the round lacked
    corpus_misses: int = 0  # nodes scan() reads that the reader's corpus lacked after the round
    gaps: int = 0  # mid-round retrievals that saw a higher-seq memory but not a lower-seq one
    retrievals: int = 0
    errors: list[str] = field(default_factory=list)
    retrieve_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0


def owner_of(round_: int) -> str:
    return f"stress-owner-{round_ % OWNERS}"


def token(round_: int, writer: int) -> str:
    return f"tok{round_}x{writer}"


def _write_rounds(
    client: MemoryClient, writer: int, rounds: int, start: Any, acks: Any, seed: int, hold_ms: float
) -> None:
    """One writer: per round, wait for the start, store a batch of 1-4 memories (the token memory
    at a random place in it) in a transaction kept open a random 0..``hold_ms`` after the insert
    (as a slow network or a larger batch would), then acknowledge the token memory's id."""
    rng = random.Random(seed)
    for r in range(rounds):
        start.wait(WAIT_S)
        items = [f"filler {rng.random():.6f} from writer {writer}" for _ in range(rng.randint(0, 3))]
        at = rng.randint(0, len(items))
        items.insert(at, f"memory of round {r} carrying {token(r, writer)}")
        time.sleep(rng.random() * 0.002)
        try:
            with client.store.transaction():  # store_batch joins it: commit waits for the hold
                nodes = client.store_batch(owner_of(r), items)
                time.sleep(rng.random() * hold_ms / 1000.0)
            acks.put((r, writer, str(nodes[at].id), len(nodes), None))
        except Exception as exc:  # noqa: BLE001 - reported by the reader
            acks.put((r, writer, None, 0, repr(exc)))


def _process_writer(url: str, writer: int, rounds: int, start: Any, acks: Any, seed: int, hold_ms: float) -> None:
    with MemoryClient(url) as client:
        _write_rounds(client, writer, rounds, start, acks, seed, hold_ms)


def _scan_order(client: MemoryClient, owner: str) -> list[str]:
    """The owner's active node ids in insertion (sequence) order, read fresh."""
    ids: list[str] = []
    cursor = None
    while True:
        page = client.scan(owner, cursor=cursor, limit=1000)
        ids.extend(str(n.id) for n in page.items)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def run_stress(
    url: str, *, rounds: int, writers: int = 4, processes: bool = True, hold_ms: float = 5.0, seed: int = 13
) -> StressResult:
    """Drive ``rounds`` rounds and count misses (see the module docstring)."""
    result = StressResult()
    if processes:
        ctx = multiprocessing.get_context("spawn")
        start, acks = ctx.Barrier(writers + 1), ctx.Queue()
        workers = [
            ctx.Process(target=_process_writer, args=(url, w, rounds, start, acks, seed * 100 + w, hold_ms))
            for w in range(writers)
        ]
        opened: list[MemoryClient] = []
    else:
        start, acks = threading.Barrier(writers + 1), queue.Queue()
        opened = [MemoryClient(url) for _ in range(writers)]
        workers = [
            threading.Thread(target=_write_rounds, args=(opened[w], w, rounds, start, acks, seed * 100 + w, hold_ms))
            for w in range(writers)
        ]
    began = time.perf_counter()
    with MemoryClient(url) as reader:
        for w in workers:
            w.start()
        try:
            for r in range(rounds):
                _one_round(reader, r, writers, start, acks, result)
        except BaseException:
            start.abort()  # release writers waiting for a round that will not come
            raise
        finally:
            for w in workers:
                w.join(WAIT_S)
            for client in opened:
                client.close()
    result.seconds = time.perf_counter() - began
    return result


def _one_round(reader: MemoryClient, r: int, writers: int, start: Any, acks: Any, result: StressResult) -> None:
    owner = owner_of(r)
    query = " ".join(token(r, w) for w in range(writers))
    acked: dict[int, str] = {}
    observed: list[set[str]] = []

    def retrieve() -> set[str]:
        t0 = time.perf_counter()
        response = reader.retrieve(query, owner=owner, reference_time=NOW, retrieval_mode="lexical", limit=50)
        result.retrieve_ms.append((time.perf_counter() - t0) * 1000.0)
        result.retrievals += 1
        return {str(x.node_id) for x in response.results}

    start.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while len(acked) < writers:
        try:
            while len(acked) < writers:
                rr, w, node_id, count, error = acks.get_nowait()
                if error is not None or rr != r:
                    result.errors.append(f"round {r} writer {w}: {error or f'ack for round {rr}'}")
                acked[w] = node_id or ""
                result.writes += count
        except queue.Empty:
            pass
        if len(acked) < writers:
            if time.monotonic() > deadline:
                raise TimeoutError(f"round {r}: only {len(acked)} of {writers} writers acknowledged")
            observed.append(retrieve())  # mid-round: the cache may keep this state
    final = retrieve()
    wanted = {node_id for node_id in acked.values() if node_id}
    result.misses += len(wanted - final)
    scanned = _scan_order(reader, owner)
    corpus = set(reader.pipeline.corpora.get(owner).ids)
    result.corpus_misses += len(set(scanned) - corpus)
    position = {node_id: i for i, node_id in enumerate(scanned)}
    tokens_in_order = sorted(wanted, key=lambda n: position.get(n, -1))
    for seen in observed:
        present = [i for i, n in enumerate(tokens_in_order) if n in seen]
        if present and any(n not in seen for n in tokens_in_order[: max(present)]):
            result.gaps += 1
    result.rounds += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="postgres", choices=["postgres", "duckdb"])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--hold-ms", type=float, default=5.0, help="longest time a writer keeps its transaction open")
    args = parser.parse_args()
    processes = args.backend == "postgres"
    with bench_store_url(args.backend) as url:
        result = run_stress(url, rounds=args.rounds, writers=args.writers, processes=processes, hold_ms=args.hold_ms)
    kind = "processes" if processes else "threads (one DuckDB file admits one process)"
    print(
        f"corpus freshness: {args.backend}, {args.writers} writer {kind} (transactions held 0-{args.hold_ms:g} ms), "
        "one long-lived reader client"
    )
    row("rounds", result.rounds, "")
    row("memories written", result.writes, "")
    row("reader retrievals", result.retrievals, "")
    row("mid-round retrievals that saw an out-of-order gap", result.gaps, "")
    row("misses (acknowledged token memory not retrieved)", result.misses, "", "target 0")
    row("corpus misses (scan() node absent from the corpus)", result.corpus_misses, "", "target 0")
    row("writer errors", len(result.errors), "", "target 0")
    row("retrieve p50", median(result.retrieve_ms) if result.retrieve_ms else float("nan"), "ms")
    row("retrieve p95", percentile(result.retrieve_ms, 0.95), "ms")
    row("wall time", result.seconds, "s")
    for error in result.errors[:5]:
        print(f"  error: {error}")


if __name__ == "__main__":
    main()
