"""Store benchmark: batch-store and scan throughput on both backends, canonical-JSON encode rate.

Run: ``python -m benchmarks.store [--backends duckdb,postgres] [--nodes 10000]``.
Targets (issue 2): ≥ 20,000 nodes/s batch store on DuckDB; ≥ 20,000 canonical encodes/s of a
50-candidate receipt-sized document. The baseline row is the standard library's json encoder
with the same settings, run in the same process, so the ratio is machine-independent.
"""

from __future__ import annotations

import argparse
import json
import random
import uuid

from benchmarks.common import bench_store_url, median, row, timed
from prme_core import MemoryClient
from prme_core.canonical import canonical_json


def receipt_sized_document(candidates: int = 50, seed: int = 7) -> dict:
    """A document shaped like a version-9 receipt: ``candidates`` scored candidates, each with
    its score trace and an index into the receipt's applied-weight sets (see receipts/model.py)."""
    rng = random.Random(seed)
    weights = {k: rng.random() for k in ("semantic", "lexical", "graph", "recency", "salience", "confidence")}
    items = []
    for rank in range(candidates):
        node = str(uuid.UUID(int=rng.getrandbits(128)))
        trace = {k: rng.random() for k in ("semantic", "lexical", "graph", "recency", "salience", "confidence",
                                           "epistemic_weight", "path_score", "temporal_affinity")}
        trace.update(node_type_boost=1.15, base_score=round(rng.random(), 10))
        items.append({"node_id": node, "scope": "personal", "content_sha256": "%064x" % rng.getrandbits(256),
                      "score": round(rng.random(), 10), "paths": ["lexical", "semantic"],
                      "provenance": {"base_node_id": node, "trace": trace, "weights": 0,
                                     "adjustments": [{"kind": "session_decay", "coefficient": 0.85}] if rank % 5 == 0 else []},
                      "representation": "full", "token_cost": rng.randint(5, 90),
                      "in_context": rank < 20, "has_content": rank < 20})
    return {"schema_version": 9, "request_id": str(uuid.uuid4()), "owner": "alice", "query": "what did alice say",
            "reference_time": "2024-03-01T12:00:00Z", "scopes": ["personal"], "candidates": items,
            "applied_weights": [{**weights, "temporal_boost": 0.15, "relevance_floor": 0.35,
                                 "current_update_multiplier": 1.3}],
            "context_sha256": "%064x" % rng.getrandbits(256)}


def bench_canonical(repeats: int = 2000) -> None:
    doc = receipt_sized_document()
    size = len(canonical_json(doc))
    ours = timed(lambda: [canonical_json(doc) for _ in range(repeats)])
    stdlib = timed(lambda: [json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                       allow_nan=False).encode() for _ in range(repeats // 4)])
    print(f"canonical JSON ({size:,} bytes, 50 candidates)")
    row("canonical_json encodes/s", repeats / ours, "docs/s", "target ≥ 20,000")
    row("stdlib json.dumps (same settings) encodes/s", (repeats // 4) / stdlib, "docs/s", "baseline")
    row("ratio ours / stdlib", (repeats / ours) / ((repeats // 4) / stdlib), "x")


def bench_backend(backend: str, nodes: int) -> None:
    with bench_store_url(backend) as url, MemoryClient(url) as client:
        client.store_batch("warmup", [{"content": "warm up"}] * 1 + [{"content": f"w{i}"} for i in range(99)])
        rates = []
        for trial in range(3):
            items = [{"content": f"Speaker {i % 2}: memory {i} of trial {trial} about tea, trains and travel",
                      "session_id": f"s{i // 20}", "node_type": "event"} for i in range(nodes)]
            rates.append(nodes / timed(lambda: client.store_batch(f"owner{trial}", items)))
        scan_rates = []
        for _ in range(3):
            scan_rates.append(nodes / timed(lambda: sum(1 for _ in client.iterate("owner0", page_size=1000))))
        print(f"{backend} ({client.store.url})")
        row(f"batch store, {nodes:,}-node batch (median of 3)", median(rates), "nodes/s",
            "target ≥ 20,000" if backend == "duckdb" else "")
        row("scan in pages of 1,000 (median of 3)", median(scan_rates), "nodes/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="duckdb,postgres")
    parser.add_argument("--nodes", type=int, default=10_000)
    args = parser.parse_args()
    bench_canonical()
    for backend in args.backends.split(","):
        bench_backend(backend.strip(), args.nodes)


if __name__ == "__main__":
    main()
