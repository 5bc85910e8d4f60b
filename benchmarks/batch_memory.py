"""Batch-store memory benchmark: peak RSS growth of one ``store_batch`` of N 64 KiB memories.

Run: ``python -m benchmarks.batch_memory [--backends duckdb,postgres] [--nodes 8000,50000]``.
Each case runs in its own subprocess so peaks do not mix. The child builds its N contents
first (those strings are the caller's input and take N × 64 KiB whatever PRME does), reads its
resident set size, runs the batch, then reads its peak (``ru_maxrss``). The figure reported is
the peak over the RSS with the input already built: what the write itself costs on top of the
input. On PostgreSQL only the client process is measured, not the server.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
import warnings

CONTENT_BYTES = 65_536
MIB = 1024 * 1024


def _current_rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def _contents(count: int) -> list[str]:
    """``count`` distinct 64 KiB ASCII strings (deterministic, incompressible hex)."""
    rng = random.Random(count)
    return [rng.randbytes(CONTENT_BYTES // 2).hex() for _ in range(count)]


def run_case(backend: str, nodes: int) -> dict:
    """One measurement in this process (the child side)."""
    from benchmarks.common import bench_store_url
    from prme_core import MemoryClient

    with bench_store_url(backend) as url, MemoryClient(url) as client:
        client.store_batch("warmup", ["warm up"])
        items = _contents(nodes)
        before = _current_rss_bytes()
        start = time.perf_counter()
        client.store_batch("bench", items)
        seconds = time.perf_counter() - start
        peak = _peak_rss_bytes()
        with client.store.transaction(read_only=True) as tx:
            stored = tx.conn.fetchall("SELECT count(*) FROM memory_nodes WHERE owner = 'bench'")[0][0]
    return {
        "backend": backend,
        "nodes": nodes,
        "input_bytes": nodes * CONTENT_BYTES,
        "rss_before": before,
        "peak": peak,
        "seconds": seconds,
        "stored": int(stored),
    }


def measure(backend: str, nodes: int) -> dict:
    """One measurement in a fresh subprocess."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.batch_memory", "--child", backend, str(nodes)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"backend": backend, "nodes": nodes, "error": (done.stderr.strip().splitlines() or ["killed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="duckdb,postgres")
    parser.add_argument("--nodes", default="8000,50000", help="comma-separated batch sizes")
    parser.add_argument("--child", nargs=2, metavar=("BACKEND", "NODES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.child:
        print(json.dumps(run_case(args.child[0], int(args.child[1]))))
        return
    print(
        f"{'backend':<10} {'memories':>9} {'input MiB':>10} {'RSS before MiB':>15} {'peak MiB':>9} "
        f"{'extra MiB':>10} {'seconds':>8}"
    )
    for backend in (b.strip() for b in args.backends.split(",")):
        for nodes in (int(n) for n in args.nodes.split(",")):
            r = measure(backend, nodes)
            if "error" in r:
                print(f"{backend:<10} {nodes:>9,} failed: {r['error']}", flush=True)
                continue
            if r["stored"] != nodes:
                print(f"{backend:<10} {nodes:>9,} stored {r['stored']:,} rows, expected {nodes:,}", flush=True)
            print(
                f"{backend:<10} {nodes:>9,} {r['input_bytes'] / MIB:>10,.0f} {r['rss_before'] / MIB:>15,.0f} "
                f"{r['peak'] / MIB:>9,.0f} {(r['peak'] - r['rss_before']) / MIB:>10,.0f} {r['seconds']:>8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
