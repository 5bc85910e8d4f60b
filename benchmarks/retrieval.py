"""Retrieval benchmark: p50/p95 latency of ``retrieve`` (receipt persistence included) over
10,000 memories of one owner, and ``replay_ranking`` throughput, on both backends.

Run: ``python -m benchmarks.retrieval [--backends duckdb,postgres] [--memories 10000] [--queries 200]``.
Targets (issue 3, this 2-core machine): p50 ≤ 15 ms on DuckDB; replay ≥ 5,000 receipts/s for
50-candidate receipts. The same run also measures retrieval with an active ranking profile
(issue 6: resolution adds ≤ 1 ms to p50) once profiles exist, and (issue 15) the cost of
recording the scored pool: the default path (interaction features, pool recorded to the default
depth and stored packed, schema version 11) against the same pipeline with pool recording off
(``receipt_pool_depth=0``) — the closest to the version-9 path that still exists: interaction
features are computed either way (they are part of every trace). Target: p50 ≤ 1.2 × that p50.
Stored bytes per retrieval (receipt JSON plus the packed pool row) are reported for both. Memory text is LoCoMo turns (repeated with distinct
sessions to reach the size) when the data is present, else synthetic.

``--baseline-rev REV`` (issue 28, faster retrieve) also runs ``retrieve`` of another commit in
the same run: two worker processes, one on a git worktree of ``REV`` and one on this tree, each
with its own store of the same memories, take the same queries in turn (alternating which goes
first), so both p50s, their ratio and the median paired difference come from one run on one
host; ``--comparison-only`` skips everything else.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import timedelta
from pathlib import Path

from benchmarks.common import bench_store_url, median, percentile, python_calibration_ms, row, timed
from prme_assets.demo.data import find_locomo_data
from prme_core import MemoryClient
from prme_core.datasets.locomo import LocomoDataNotFound, read_locomo
from prme_core.receipts import store as receipt_store
from prme_core.receipts.store import receipt_bytes
from prme_core.storage import base as store_base
from prme_core.storage import receipt_rows
from prme_core.storage.schema import RECEIPTS_FOLDED_VERSION

OWNER = "bench-owner"
PROFILE_OWNER = "bench-owner-with-profile"
NO_POOL = "pool-off"  # the OWNER arm with receipt_pool_depth=0
RAW_POOL = "pool-raw"  # the OWNER arm with every receipt row stored as before issue 28
PREVIOUS = "receipt-text"  # the OWNER arm with the receipt stored as before its compaction (issue 28, part 2)


@contextmanager
def previous_receipt_storage() -> Iterator[None]:
    """Store receipts as before their compaction: the canonical JSON as text, the projection's
    float block as is and every id as itself (no node references), on every backend (pools
    compressed, as now)."""
    saved = (
        receipt_store.COMPRESSED_RECEIPT_BACKENDS,
        receipt_store.COMPRESSED_FLOAT_BACKENDS,
        receipt_rows.REF_BACKENDS,
    )
    receipt_store.COMPRESSED_RECEIPT_BACKENDS = receipt_store.COMPRESSED_FLOAT_BACKENDS = frozenset()
    receipt_rows.REF_BACKENDS = frozenset()
    try:
        yield
    finally:
        (
            receipt_store.COMPRESSED_RECEIPT_BACKENDS,
            receipt_store.COMPRESSED_FLOAT_BACKENDS,
            receipt_rows.REF_BACKENDS,
        ) = saved


@contextmanager
def raw_pool_storage() -> Iterator[None]:
    """Store receipt rows as before issue 28: the packed pool as it is, the receipt as text, on
    every backend."""
    original = receipt_store._stored
    receipt_store._stored = lambda packed, backend: packed
    try:
        with previous_receipt_storage():
            yield
    finally:
        receipt_store._stored = original


@contextmanager
def unfolded_stores() -> Iterator[None]:
    """Stores opened meanwhile keep a receipt's projection in its own table, as before
    migration 11 folded it into the receipt's row on DuckDB (``storage.sql.FOLDED_PROJECTION_COLUMNS``)."""
    saved = store_base.MIGRATIONS
    store_base.MIGRATIONS = tuple(m for m in saved if m.version < RECEIPTS_FOLDED_VERSION)
    try:
        yield
    finally:
        store_base.MIGRATIONS = saved


def storage_arm(arm: str) -> AbstractContextManager[None]:
    """How the arm stores its receipts: before issue 28, before the receipt's compaction, or now."""
    if arm == RAW_POOL:
        return raw_pool_storage()
    return previous_receipt_storage() if arm == PREVIOUS else nullcontext()


def disk_bytes(client: MemoryClient) -> int:
    """The store's bytes on disk with every row packed: the DuckDB file rewritten by a vacuum (a
    file after a mere checkpoint grows in 256 KB blocks and reuses freed ones, which hides a
    receipt's size), or PostgreSQL's PRME tables after VACUUM FULL, with their TOAST and indexes."""
    return client.vacuum().bytes_after


def _opened(url: str, *, folded: bool) -> MemoryClient:
    """A client on ``url``; with ``folded=False`` its store keeps the row layout from before migration 11."""
    if folded:
        return MemoryClient(url)
    with unfolded_stores():
        return MemoryClient(url)


def bytes_per_retrieval(backend: str, items: list[dict], qs: list[str], limit: int, n: int) -> dict[str, float]:
    """Bytes on disk per retrieval as stored before issue 28, before the receipt's compaction and now: each arm
    gets a fresh store with the same memories, writes ``n`` receipts (the queries in turn) and
    the growth of the vacuumed store is divided by ``n`` (DuckDB files grow in 256 KB blocks, so
    ``n`` is large enough that one block is under 1 KB a retrieval)."""
    out = {}
    for arm in (RAW_POOL, PREVIOUS, OWNER):
        with bench_store_url(backend) as url, _opened(url, folded=arm == OWNER) as client:
            for start in range(0, len(items), 5000):
                client.store_batch(OWNER, items[start : start + 5000])
            before = disk_bytes(client)
            with storage_arm(arm):
                for i in range(n):
                    client.retrieve(qs[i % len(qs)], owner=OWNER, limit=limit)
            out[arm] = (disk_bytes(client) - before) / n
    return out


def corpus_and_queries(memories: int, queries: int, seed: int = 11) -> tuple[list[dict], list[str]]:
    rng = random.Random(seed)
    try:
        path = find_locomo_data()
    except LocomoDataNotFound:
        path = None
    if path is not None:
        convs = read_locomo(path)
        turns = [m for c in convs for m in c.memories()]
        questions = [q.question for c in convs for q in c.questions]
    else:
        words = [f"w{i}" for i in range(3000)]
        turns, questions = [], []
        for i in range(2000):
            turns.append({"content": " ".join(rng.choice(words) for _ in range(18)), "session_id": f"s{i // 20}"})
        questions = [" ".join(rng.choice(words) for _ in range(7)) for _ in range(500)]
    items = []
    for i in range(memories):
        base = turns[i % len(turns)]
        data = base.model_dump() if hasattr(base, "model_dump") else dict(base)
        data.pop("id", None)
        cycle = i // len(turns)
        if data.get("session_id"):
            data["session_id"] = f"{data['session_id']}#{cycle}"
        if data.get("event_time"):
            data["event_time"] = data["event_time"] + timedelta(days=400 * cycle)
        items.append(data)
    rng.shuffle(questions)
    return items, questions[:queries]


def raw_baselines(items: list[dict], queries: list[str], limit: int) -> dict[str, float]:
    """Same-process baselines (ms per query): a bare bm25s query over the same texts, and a bare
    384-d float32 matrix-vector product over as many rows. ``retrieve`` p50 divided by these
    says how much of its time is ours, whatever the host's speed."""
    import bm25s
    import numpy as np

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([i["content"] for i in items], show_progress=False), show_progress=False)
    tokenized = [bm25s.tokenize([q], show_progress=False) for q in queries]
    bm25 = [timed(lambda t=t: retriever.retrieve(t, k=limit, show_progress=False)) * 1000.0 for t in tokenized]
    matrix = np.random.default_rng(3).standard_normal((len(items), 384), dtype=np.float32)
    vector = matrix[0].copy()
    dot = [timed(lambda: np.argpartition(-(matrix @ vector), limit)[:limit]) * 1000.0 for _ in queries]
    return {"bm25": median(bm25), "dot": median(dot)}


def bench_backend(backend: str, memories: int, queries: int, limit: int) -> None:
    items, qs = corpus_and_queries(memories, queries)
    with bench_store_url(backend) as url, MemoryClient(url) as client:
        for owner in (OWNER, PROFILE_OWNER):  # the same corpus twice; only PROFILE_OWNER gets a profile
            for start in range(0, len(items), 5000):
                client.store_batch(owner, items[start : start + 5000])
        activate_direct_profile(client, PROFILE_OWNER)
        # One unmeasured pass for each owner, so every measured retrieval starts warm.
        for q in qs:
            client.retrieve(q, owner=OWNER, limit=limit)
            assert client.retrieve(q, owner=PROFILE_OWNER, limit=limit).metadata.ranking_profile_status == "applied"
        # Interleaved, alternating which owner goes first: host drift (this VM is noisy) and
        # order effects hit both arms alike, and the per-query difference is paired.
        latencies, with_profile, receipts, no_pool, no_pool_bytes = [], [], [], [], []
        earlier: dict[str, list[float]] = {RAW_POOL: [], PREVIOUS: []}
        arms = (OWNER, PROFILE_OWNER, NO_POOL, RAW_POOL, PREVIOUS)
        for i, q in enumerate(qs):
            for arm in arms[i % len(arms) :] + arms[: i % len(arms)]:
                owner = PROFILE_OWNER if arm == PROFILE_OWNER else OWNER
                packing = {"receipt_pool_depth": 0} if arm == NO_POOL else None
                with storage_arm(arm):
                    start = time.perf_counter()
                    response = client.retrieve(q, owner=owner, limit=limit, packing=packing)
                    elapsed_ms = (time.perf_counter() - start) * 1000.0
                if arm in earlier:
                    earlier[arm].append(elapsed_ms)
                    continue
                assert response.metadata.receipt_persisted
                if arm == OWNER:
                    latencies.append(elapsed_ms)
                    receipts.append(response.receipt)
                elif arm == NO_POOL:
                    no_pool.append(elapsed_ms)
                    no_pool_bytes.append(stored_bytes(response.receipt, client.store.backend))
                else:
                    with_profile.append(elapsed_ms)
        baselines = raw_baselines(items, qs, limit)
        sizes = [len(r.candidates) for r in receipts]
        print(
            f"{backend}: {memories:,} memories, {len(qs)} queries, limit {limit} "
            f"(mean {sum(sizes) / len(sizes):.1f} candidates per receipt)"
        )
        row(
            "retrieve p50 (incl. receipt persistence)",
            percentile(latencies, 0.5),
            "ms",
            "target ≤ 15 ms" if backend == "duckdb" else "",
        )
        row("retrieve p95", percentile(latencies, 0.95), "ms")
        row("baseline: bare bm25s query, same texts (median)", baselines["bm25"], "ms")
        row("baseline: bare 384-d dot product + top-k (median)", baselines["dot"], "ms")
        row(
            "retrieve p50 / (bm25s + dot baselines)",
            percentile(latencies, 0.5) / (baselines["bm25"] + baselines["dot"]),
            "x",
        )
        row("retrieve p50 with an active profile (interleaved)", percentile(with_profile, 0.5), "ms")
        row(
            "profile cost: median paired difference",
            median([b - a for a, b in zip(latencies, with_profile)]),
            "ms",
            "target ≤ 1 ms",
        )
        row("retrieve p50, pool recording off (receipt_pool_depth=0, interleaved)", percentile(no_pool, 0.5), "ms")
        row(
            "pool-recording p50 / pool-off p50",
            100.0 * percentile(latencies, 0.5) / percentile(no_pool, 0.5),
            "%",
            "target ≤ 120%",
        )
        row("pool cost: median paired difference", median([a - b for a, b in zip(latencies, no_pool)]), "ms")
        pooled_bytes = [stored_bytes(r, client.store.backend) for r in receipts]
        row("stored bytes per retrieval, pool off (mean; receipt JSON + empty pool row)", mean(no_pool_bytes), "B")
        row("stored bytes per retrieval, default (mean; receipt JSON + packed pool)", mean(pooled_bytes), "B")
        row("  of which the packed pool (mean)", mean([len(r.packed_pool()) for r in receipts]), "B")
        row(
            "  the pool handed to the store (mean; compressed, its ids beside; PostgreSQL then stores them as node references)",
            mean([len(receipt_store._stored(r.packed_pool(), client.store.backend)) for r in receipts]),
            "B",
        )
        for arm, label in (
            (RAW_POOL, "encoded as before issue 28, rows as now"),
            (PREVIOUS, "receipt stored as text, rows as now"),
        ):
            row(f"retrieve p50, {label} (interleaved)", percentile(earlier[arm], 0.5), "ms")
            row(f"retrieve p50 now / {label}", percentile(latencies, 0.5) / percentile(earlier[arm], 0.5), "x")
            row(
                f"retrieve: median paired difference now - {label}",
                median([a - b for a, b in zip(latencies, earlier[arm])]),
                "ms",
            )
        on_disk = bytes_per_retrieval(backend, items, qs, limit, n=600)
        row("bytes on disk per retrieval before issue 28 (every receipt row as is, two rows)", on_disk[RAW_POOL], "B")
        row(
            "bytes on disk per retrieval, receipt as text (pool compressed on PostgreSQL, two rows)",
            on_disk[PREVIOUS],
            "B",
        )
        row(
            "bytes on disk per retrieval, now (receipt compressed on PostgreSQL, float block on both, one row on DuckDB)",
            on_disk[OWNER],
            "B",
            "target ≤ 15 KB",
        )
        complete = sum(r.pool.complete for r in receipts)
        depth = receipts[0].pool.depth
        row(
            f"pools complete at the default depth {depth}",
            complete / len(receipts) * 100.0,
            "%",
            f"pool size mean {mean([r.pool.size for r in receipts]):.0f}, max {max(r.pool.size for r in receipts)}; "
            f"complete at depth 100: {100.0 * sum(r.pool.size <= 100 for r in receipts) / len(receipts):.0f}%",
        )
        full = [r for r in receipts if len(r.candidates) == limit] or receipts
        rounds = max(1, 5000 // len(full))
        elapsed = timed(lambda: [r.replay_ranking() for _ in range(rounds) for r in full])
        row(
            f"replay_ranking ({len(full[0].candidates)}-candidate receipts)",
            rounds * len(full) / elapsed,
            "receipts/s",
            "target ≥ 5,000",
        )


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def stored_bytes(receipt, backend: str) -> int:  # noqa: ANN001 - a RetrievalReceipt
    """What one retrieval stores for replay: the receipt's canonical bytes plus its stored pool."""
    packed = receipt.packed_pool()
    return len(receipt_bytes(receipt)) + (len(receipt_store._stored(packed, backend)) if packed else 0)


def activate_direct_profile(client: MemoryClient, owner: str) -> None:
    """An applied profile for ``owner``. The pointer change is written directly (an activate
    record carrying the running pipeline's feature identity and base scoring): this measures
    the resolution path — pointer read, applicability check, request-local multipliers — and
    says nothing about learning."""
    import uuid

    from prme_core.profiles.model import RankingProfileApplication, RankingProfileState
    from prme_core.profiles.registry import record_change
    from prme_core.retrieval.multipliers import RankingMultipliers
    from prme_core.types import utc_now

    scopes = tuple(sorted(client.settings.scopes))
    profile_id, change_id = uuid.uuid4(), uuid.uuid4()
    app = RankingProfileApplication(
        profile_id=profile_id,
        multipliers=RankingMultipliers(lexical=2.0, salience=0.5),
        feature_identity_sha256=client.running_feature_identity(),
        base_scoring=client.settings.scoring,
    )
    state = RankingProfileState(
        change_id=change_id,
        owner=owner,
        scopes=scopes,
        action="activate",
        previous_profile_id=None,
        active_profile_id=profile_id,
        application=app,
        changed_at=utc_now(),
    )
    with client.store.transaction() as tx:
        record_change(tx, state)


# A worker's whole program: it imports ``prme_core`` from the tree it is given (its first
# argument), so the same source times any commit. It builds its store from the corpus file,
# gives PROFILE_OWNER an applied profile, warms both owners, prints "ready", then answers each
# request line ("<owner> <query index>") with the elapsed milliseconds of one retrieve.
_WORKER = r"""
import json, sys, time, uuid, warnings
warnings.simplefilter("ignore")
root, url, corpus_file, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, root)
from prme_core import MemoryClient
from prme_core.profiles.model import RankingProfileApplication, RankingProfileState
from prme_core.profiles.registry import record_change
from prme_core.retrieval.multipliers import RankingMultipliers
from prme_core.types import utc_now
import prme_core
assert prme_core.__file__.startswith(root), prme_core.__file__
data = json.load(open(corpus_file))
items, queries, owners = data["items"], data["queries"], data["owners"]
with MemoryClient(url) as client:
    for owner in owners:
        for start in range(0, len(items), 5000):
            client.store_batch(owner, items[start : start + 5000])
    profile_id = uuid.uuid4()
    app = RankingProfileApplication(
        profile_id=profile_id,
        multipliers=RankingMultipliers(lexical=2.0, salience=0.5),
        feature_identity_sha256=client.running_feature_identity(),
        base_scoring=client.settings.scoring,
    )
    state = RankingProfileState(
        change_id=uuid.uuid4(), owner=owners[1], scopes=tuple(sorted(client.settings.scopes)), action="activate",
        previous_profile_id=None, active_profile_id=profile_id, application=app, changed_at=utc_now(),
    )
    with client.store.transaction() as tx:
        record_change(tx, state)
    for q in queries:
        for owner in owners:
            client.retrieve(q, owner=owner, limit=limit)
    print("ready", flush=True)
    for line in sys.stdin:
        owner, index = line.split()
        start = time.perf_counter()
        response = client.retrieve(queries[int(index)], owner=owner, limit=limit)
        elapsed = (time.perf_counter() - start) * 1000.0
        meta = response.metadata
        print(json.dumps([elapsed, meta.receipt_persisted, meta.ranking_profile_status]), flush=True)
"""


class _Worker:
    """One worker process timing ``retrieve`` of the code under ``root``."""

    def __init__(self, root: Path, url: str, corpus_file: str, limit: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(root), url, corpus_file, str(limit)],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self) -> None:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if line.strip() != "ready":
            raise RuntimeError(f"benchmark worker failed to start (exit {self.proc.wait()})")

    def retrieve(self, owner: str, index: int) -> tuple[float, bool, str]:
        self.proc.stdin.write(f"{owner} {index}\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        elapsed, persisted, status = json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]
        return float(elapsed), bool(persisted), str(status)

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait()


def compare_with_revision(backend: str, rev: str, memories: int, queries: int, limit: int) -> None:
    """p50 of ``retrieve`` on this tree and on commit ``rev`` in one run: a worker process each,
    each with its own store of the same memories, the same queries in turn, alternating which
    arm goes first; with and without an applied profile."""
    here = Path(__file__).resolve().parents[1]
    items, qs = corpus_and_queries(memories, queries)
    for item in items:
        for key, value in item.items():
            if hasattr(value, "isoformat"):
                item[key] = value.isoformat()
    commit = subprocess.run(
        ["git", "-C", str(here), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(here), "worktree", "add", "--detach", str(tree), commit], check=True, capture_output=True
        )
        corpus_file = str(Path(tmp) / "corpus.json")
        with open(corpus_file, "w") as out:
            json.dump({"items": items, "queries": qs, "owners": [OWNER, PROFILE_OWNER]}, out)
        try:
            with bench_store_url(backend) as url_now, bench_store_url(backend) as url_then:
                arms = {
                    "now": _Worker(here, url_now, corpus_file, limit),
                    "then": _Worker(tree, url_then, corpus_file, limit),
                }
                try:
                    for worker in arms.values():
                        worker.wait_ready()
                    timings = _interleaved(arms, len(qs))
                    runs = _in_runs(arms, len(qs))
                finally:
                    for worker in arms.values():
                        worker.close()
        finally:
            subprocess.run(
                ["git", "-C", str(here), "worktree", "remove", "--force", str(tree)], check=False, capture_output=True
            )
    print(
        f"{backend}: this tree against {rev} ({commit[:10]}), {memories:,} memories, {len(qs)} queries, limit {limit}, interleaved"
    )
    for owner, label in ((OWNER, "no profile"), (PROFILE_OWNER, "applied profile")):
        now, then = timings[("now", owner)], timings[("then", owner)]
        _p50_rows(label, rev, now, then, "target ≤ 70%" if owner == OWNER and backend == "duckdb" else "")
        row(
            f"retrieve {label}: median paired difference this tree - {rev}",
            median([a - b for a, b in zip(now, then)]),
            "ms",
        )
    for arm, name in (("then", rev), ("now", "this tree")):
        cost = median([b - a for a, b in zip(timings[(arm, OWNER)], timings[(arm, PROFILE_OWNER)])])
        row(f"profile cost ({name}): median paired difference", cost, "ms", "target ≤ 1 ms" if arm == "now" else "")
    _p50_rows(f"no profile in runs of {RUN}", rev, runs["now"], runs["then"], "")


def _p50_rows(label: str, rev: str, now: list[float], then: list[float], target: str) -> None:
    row(f"retrieve p50 {label}, {rev}", percentile(then, 0.5), "ms")
    row(f"retrieve p50 {label}, this tree", percentile(now, 0.5), "ms")
    row(f"retrieve p50 {label}, this tree / {rev}", 100.0 * percentile(now, 0.5) / percentile(then, 0.5), "%", target)


RUN = 20
"""Retrievals in a row per worker in the second comparison (``_in_runs``)."""


def _in_runs(arms: dict[str, _Worker], queries: int) -> dict[str, list[float]]:
    """The no-profile owner's queries again, ``RUN`` in a row per worker, the workers taking
    turns (which goes first alternates). Interleaving one retrieval at a time (``_interleaved``)
    hands the CPU to the other worker before every retrieval, so each one starts with caches the
    other process filled; a server answering requests back to back mostly does not. Both
    figures are reported; neither replaces the other."""
    timings: dict[str, list[float]] = {arm: [] for arm in arms}
    names = list(arms)
    for block, start in enumerate(range(0, queries, RUN)):
        for arm in names if block % 2 == 0 else names[::-1]:
            for i in range(start, min(start + RUN, queries)):
                elapsed, persisted, status = arms[arm].retrieve(OWNER, i)
                if not persisted or status != "none":
                    raise RuntimeError(f"{arm} {OWNER}: receipt persisted {persisted}, profile {status}")
                timings[arm].append(elapsed)
    return timings


def _interleaved(arms: dict[str, _Worker], queries: int) -> dict[tuple[str, str], list[float]]:
    """Each query once per (arm, owner), the four in a rotating order."""
    order = [(arm, owner) for arm in arms for owner in (OWNER, PROFILE_OWNER)]
    timings: dict[tuple[str, str], list[float]] = {key: [] for key in order}
    for i in range(queries):
        for arm, owner in order[i % len(order) :] + order[: i % len(order)]:
            elapsed, persisted, status = arms[arm].retrieve(owner, i)
            if not persisted or status != ("applied" if owner == PROFILE_OWNER else "none"):
                raise RuntimeError(f"{arm} {owner}: receipt persisted {persisted}, profile {status}")
            timings[(arm, owner)].append(elapsed)
    return timings


def main() -> None:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="duckdb,postgres")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--baseline-rev", default=None, help="also time retrieve of this git commit, interleaved")
    parser.add_argument("--comparison-only", action="store_true", help="with --baseline-rev: only the comparison")
    args = parser.parse_args()
    if args.comparison_only and args.baseline_rev is None:
        parser.error("--comparison-only needs --baseline-rev")
    print(f"host yardstick: sum(range(10**6)) takes {python_calibration_ms():.1f} ms here")
    for backend in args.backends.split(","):
        if not args.comparison_only:
            bench_backend(backend.strip(), args.memories, args.queries, args.limit)
        if args.baseline_rev is not None:
            compare_with_revision(backend.strip(), args.baseline_rev, args.memories, args.queries, args.limit)


if __name__ == "__main__":
    main()
