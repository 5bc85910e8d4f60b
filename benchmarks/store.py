"""Store benchmark: batch-store and scan throughput on both backends, canonical-JSON encode rate.

Run: ``python -m benchmarks.store [--backends duckdb,postgres] [--nodes 10000]``.
Targets (issue 2): ≥ 20,000 nodes/s batch store on DuckDB; ≥ 20,000 canonical encodes/s of a
50-candidate receipt-sized document. The baseline row is the standard library's json encoder
with the same settings, run in the same process, so the ratio is machine-independent.
"""

from __future__ import annotations

import argparse
import json
import warnings

from benchmarks.common import bench_store_url, median, row, timed
from prme_core import MemoryClient
from prme_core.canonical import canonical_json


def receipt_document(candidates: int = 50) -> dict:
    """The canonical dict of a real version-9 receipt with ``candidates`` candidates, produced by
    the retrieval pipeline over an in-memory store (LoCoMo text when present, else synthetic)."""
    from benchmarks.retrieval import corpus_and_queries

    items, queries = corpus_and_queries(3000, 20)
    with MemoryClient("duckdb:///:memory:") as client:
        client.store_batch("bench", items)
        for query in queries:
            receipt = client.retrieve(query, owner="bench", limit=candidates).receipt
            if len(receipt.candidates) == candidates:
                return receipt.canonical_dict()
    raise RuntimeError(f"no query returned {candidates} candidates")


def bench_canonical(repeats: int = 4000) -> None:
    doc = receipt_document()
    size = len(canonical_json(doc))

    def encode_ours() -> None:
        for _ in range(repeats):
            canonical_json(doc)

    def encode_stdlib() -> None:
        for _ in range(repeats // 4):
            json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()

    ours, stdlib = timed(encode_ours), timed(encode_stdlib)
    print(f"canonical JSON of a real 50-candidate version-9 receipt ({size:,} bytes)")
    row("canonical_json encodes/s (with the NaN scan)", repeats / ours, "docs/s", "target ≥ 20,000")
    trusted = timed(lambda: [canonical_json(doc, finite=True) and None for _ in range(repeats)])
    row("canonical_json(finite=True) encodes/s (receipt path)", repeats / trusted, "docs/s")
    row("stdlib json.dumps (same settings) encodes/s", (repeats // 4) / stdlib, "docs/s", "baseline")
    row("ratio ours / stdlib", (repeats / ours) / ((repeats // 4) / stdlib), "x")


def bench_backend(backend: str, nodes: int) -> None:
    with bench_store_url(backend) as url, MemoryClient(url) as client:
        client.store_batch("warmup", [{"content": "warm up"}] * 1 + [{"content": f"w{i}"} for i in range(99)])
        rates = []
        for trial in range(3):
            items = [
                {
                    "content": f"Speaker {i % 2}: memory {i} of trial {trial} about tea, trains and travel",
                    "session_id": f"s{i // 20}",
                    "node_type": "event",
                }
                for i in range(nodes)
            ]
            rates.append(nodes / timed(lambda owner=f"owner{trial}", items=items: client.store_batch(owner, items)))
        scan_rates = []
        for _ in range(3):
            scan_rates.append(nodes / timed(lambda: sum(1 for _ in client.iterate("owner0", page_size=1000))))
        print(f"{backend} ({client.store.url})")
        row(
            f"batch store, {nodes:,}-node batch (median of 3)",
            median(rates),
            "nodes/s",
            "target ≥ 20,000" if backend == "duckdb" else "",
        )
        row("scan in pages of 1,000 (median of 3)", median(scan_rates), "nodes/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="duckdb,postgres")
    parser.add_argument("--nodes", type=int, default=10_000)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    bench_canonical()
    for backend in args.backends.split(","):
        bench_backend(backend.strip(), args.nodes)


if __name__ == "__main__":
    main()
