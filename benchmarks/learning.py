"""Learning benchmark: wall time and peak memory of the snapshot cut plus ``evaluate_learning``
for 10k and 100k relevance records (1,000 query groups, 50-candidate receipts) on DuckDB.

Run: ``python -m benchmarks.learning [--records 10000,100000] [--groups 1000]``.
Target (issues 5 and 16): 100k records in ≤ 30 s on this machine, snapshot read from DuckDB
included, on the judged path and on the pool path (receipts with recorded pools, fitted by pool
replay), printed side by side.

Setup goes through the project's own code, so the data follows the current receipt schema:
``synthetic_receipt`` builds genuine receipts (scores from the real formula, candidates in the
real sort order, validated by the receipt model), ``write_receipts`` persists a thousand per
transaction with their projections (one multi-row insert per table), ``synthetic_record``
judges ten candidates of each with a planted lexical signal and ``append_relevance`` stores the
judgment as ``record_relevance`` does; one receipt per chunk is read back through
``get_receipt``, which verifies its checksum.
Setup is the slow part (one transaction per relevance record, as in production: under three
minutes at 10k records here, proportionally more at 100k) and is not measured: the cut and the
evaluation run in a fresh process so its peak RSS is the evaluation's own; a 10x-smaller run in
the same invocation is the baseline for the scaling ratio.
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
from pathlib import Path

from prme_core.feedback.relevance import append_relevance
from prme_core.learning.synthetic import synthetic_receipt, synthetic_record
from prme_core.receipts.store import get_receipt, write_receipts
from prme_core.storage import open_store

OWNER = "bench-owner"
CANDIDATES = 50
JUDGED = 10
THRESHOLD = 0.7
"""A candidate is planted relevant when its lexical feature plus N(0, 0.15) noise exceeds this."""
CHUNK = 1000
"""Receipts built and written per transaction."""
PROGRESS_EVERY = 5000


def write_dataset(url: str, records: int, groups: int, seed: int = 5, pool: int = 0) -> None:
    """Write ``records`` receipts (one per record) and their relevance records into the store at
    ``url``; with ``pool`` > 0 each receipt records a complete pool of that many scored members
    (the returned candidates are its best), as retrieval does."""
    rng = random.Random(seed)
    store = open_store(url)
    started = time.perf_counter()
    try:
        for done in range(0, records, CHUNK):
            batch = [
                synthetic_receipt(
                    rng,
                    owner=OWNER,
                    query=f"benchmark question {(done + i) % groups}",
                    candidates=CANDIDATES,
                    threshold=THRESHOLD,
                    pool=pool,
                )
                for i in range(min(CHUNK, records - done))
            ]
            with store.transaction() as tx:
                write_receipts(tx, [receipt for receipt, _ in batch])
            for receipt, relevant in batch:
                append_relevance(store, synthetic_record(rng, receipt, relevant, judged=JUDGED))
            if get_receipt(store, OWNER, batch[-1][0].request_id) is None:  # read back: checksum and model verified
                raise RuntimeError(f"receipt {batch[-1][0].request_id} was not stored")
            written = done + len(batch)
            if written % PROGRESS_EVERY == 0 or written == records:
                print(
                    f"  setup: {written:,}/{records:,} records written ({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        store.close()


_CHILD = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from prme_core.storage import open_store
from prme_core.learning.snapshot import cut_snapshot
from prme_core.learning.observations import prepare
from prme_core.learning.offline import evaluate_prepared
start = time.perf_counter()
store = open_store(sys.argv[1])
snapshot = cut_snapshot(store, "bench-owner", max_records=int(sys.argv[2]))
cut = time.perf_counter() - start
prepared = prepare(snapshot, owner="bench-owner", scopes=["personal"])
ready = time.perf_counter() - start
report = evaluate_prepared(prepared)
total = time.perf_counter() - start
print(json.dumps({"cut_s": cut, "prepare_s": ready - cut, "total_s": total,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "decision": report.decision, "lexical": report.multipliers.lexical, "path": report.fit_path,
                  "algorithm": report.algorithm, "fit_requests": report.fit_requests,
                  "evaluations": report.search_evaluations,
                  "gain": report.validation_ndcg_gain, "groups": report.coverage.training_queries + report.coverage.validation_queries,
                  "pairs": report.coverage.explicit_pairs}))
"""


def measure(url: str, records: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, url, str(max(records, 1))], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", default="10000,100000")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--pool", type=int, default=150, help="scored members per receipt's recorded pool")
    parser.add_argument("--paths", default="judged,pool", help="judged: receipts without pools; pool: with")
    parser.add_argument(
        "--datasets",
        default=None,
        help="keep the generated stores in this folder and reuse them on the next run (default: temporary)",
    )
    args = parser.parse_args()
    sizes = [int(x) for x in args.records.split(",")]
    paths = [p.strip() for p in args.paths.split(",")]
    results: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.datasets or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for size in sizes:
            for path in paths:
                pool = args.pool if path == "pool" else 0
                file = Path(tmp) / f"learning-{path}-{size}-{args.groups}-{pool}.duckdb"
                url = f"duckdb:///{file}"
                if not (args.datasets and file.exists()):
                    file.unlink(missing_ok=True)
                    write_dataset(url, size, args.groups, pool=pool)
                r = results[(path, size)] = measure(url, size)
                kind = f"pools of {pool} members" if pool else "no pools (the version-9 path)"
                print(
                    f"{size:,} records, {args.groups:,} query groups, {CANDIDATES}-candidate receipts, "
                    f"{JUDGED} judged each, {kind}"
                )
                print(f"  snapshot cut (DuckDB)            {r['cut_s']:8.2f} s")
                print(f"  prepare (labels, pools read)     {r['prepare_s']:8.2f} s")
                print(
                    f"  cut + evaluate_learning          {r['total_s']:8.2f} s   "
                    f"{'target ≤ 30 s' if size >= 100_000 else ''}"
                )
                print(f"  peak RSS of the evaluation       {r['peak_rss_mb']:8.0f} MB")
                print(
                    f"  {r['path']} path, {r['algorithm']}, {r['fit_requests']} training requests fitted"
                    + (f", {r['evaluations']} search evaluations" if r["evaluations"] else "")
                )
                print(
                    f"  decision {r['decision']}, lexical ×{r['lexical']:.2f}, validation NDCG gain "
                    f"{r['gain'] if r['gain'] is None else round(r['gain'], 4)}, {r['groups']} groups, "
                    f"{r['pairs']:,} pairs"
                )
                if not args.datasets:
                    file.unlink(missing_ok=True)
    for path in paths:
        if len(sizes) > 1:
            small, large = sizes[0], sizes[-1]
            ratio = results[(path, large)]["total_s"] / results[(path, small)]["total_s"]
            print(f"scaling ({path} path): {large // small}x the records took {ratio:.1f}x the time")
    if len(paths) == 2:
        for size in sizes:
            a, b = results[(paths[1], size)]["total_s"], results[(paths[0], size)]["total_s"]
            print(f"{size:,} records: {paths[1]} path {a:.2f} s beside the {paths[0]} path's {b:.2f} s ({a / b:.2f}x)")


if __name__ == "__main__":
    main()
