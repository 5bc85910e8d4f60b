"""Helpers shared by the benchmark scripts: timing, store URLs, printing."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def add_output_options(parser: argparse.ArgumentParser, *, scratch: Path, committed: str) -> None:
    """``--out DIR`` (default ``scratch``) or ``--update-results`` (overwrite the ``committed``
    results), never both: only the second writes what the repository holds."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--out", default=None, help=f"output directory (default: {scratch} under the working directory)")
    group.add_argument("--update-results", action="store_true", help=f"overwrite the committed results ({committed})")


@contextmanager
def bench_store_url(backend: str) -> Iterator[str]:
    """A throwaway store URL: a temp DuckDB file, or a temp schema on PRME_TEST_POSTGRES_DSN."""
    if backend == "duckdb":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"duckdb:///{Path(tmp) / 'bench.duckdb'}"
        return
    import psycopg

    dsn = os.environ.get("PRME_TEST_POSTGRES_DSN", DEFAULT_PG)
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}prme_schema={schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values)


def row(label: str, value: float, unit: str, target: str = "") -> None:
    print(f"  {label:<52} {value:>12,.1f} {unit:<10} {target}", flush=True)


def python_calibration_ms(repeats: int = 7) -> float:
    """Median time of a fixed pure-Python loop (``sum(range(10**6))``): a yardstick for how fast
    this host runs interpreter-bound code, printed beside figures whose targets were set on
    another machine."""
    return median([timed(lambda: sum(range(10**6))) * 1000.0 for _ in range(repeats)])
