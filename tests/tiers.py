"""Test tiers: every test gets exactly one tier marker from where it lives and what it uses,
so ``-m`` selects a tier without a marker on every function.

* ``server`` — starts a real server, worker or subprocess (Uvicorn, dagster-webserver, Celery,
  the ``prme`` command, a multiprocess Dagster run);
* ``dagster`` — materializes assets or runs jobs on a Dagster instance in this process;
* ``contract`` — runs once per storage backend (DuckDB and PostgreSQL);
* ``unit`` — everything else: one module's behaviour, in memory or on a temporary file.

``slow`` is added beside the tier for tests that take more than about ten seconds on the 2-core
development machine (measured with ``--durations``); the fast tier for day-to-day work is
``-m "not slow and not server"``. ``locomo`` marks tests that need the LoCoMo development data:
they skip where it is absent, and fail under CI, which must run them.
"""

from __future__ import annotations

import pytest

TIERS = ("unit", "contract", "dagster", "server")

SERVER_FILES = {
    "tests/api/test_http.py",
    "tests/api/test_mcp.py",
    "tests/assets/test_celery_executor.py",
    "tests/assets/test_dagster_webserver.py",
    "tests/assets/test_operator_cli.py",
    "tests/assets/test_api_cli.py",
    "tests/test_readme_tour.py",
    "tests/storage/test_damaged_store.py",
    "tests/api/test_api_docs.py",
    "tests/api/test_http_strictness.py",
    "tests/api/test_probe_defects.py",
    "tests/assets/test_cli_defects.py",
    "tests/assets/test_forget_cli.py",
    "tests/assets/test_main_sample.py",
}
"""Files whose tests start a server, a worker or a subprocess."""
SERVER_TESTS = ("multiprocess",)
"""Test-name fragments that mean a subprocess (a multiprocess Dagster run) in any file."""

SLOW_FILES = {
    "tests/bench/test_locomo_benchmark.py",
    "tests/bench/test_locomo_nightly.py",
    "tests/bench/test_locomo_tuning.py",
    "tests/bench/test_scale_benchmark.py",
    "tests/bench/test_http_benchmark.py",
    "tests/assets/test_locomo.py",
    "tests/assets/test_batched_learning.py",
    "tests/test_layers.py",
    "tests/test_lint.py",
}
"""Files whose tests each take more than about ten seconds."""
SLOW_TESTS: set[str] = set()
"""Single slow tests elsewhere (node ids without the parameter part)."""


def tier_of(item: pytest.Item) -> str:
    path = item.nodeid.split("::", 1)[0]
    name = getattr(item, "originalname", item.name)
    if path in SERVER_FILES or any(fragment in name for fragment in SERVER_TESTS):
        return "server"
    if path.startswith("tests/assets/"):
        return "dagster"
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(v in ("duckdb", "postgres") for v in callspec.params.values()):
        return "contract"
    return "unit"


def assign(items: list[pytest.Item]) -> None:
    for item in items:
        own = [m.name for m in item.iter_markers() if m.name in TIERS]
        if not own:
            item.add_marker(getattr(pytest.mark, tier_of(item)))
        path = item.nodeid.split("::", 1)[0]
        base = item.nodeid.split("[", 1)[0]
        if path in SLOW_FILES or base in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
