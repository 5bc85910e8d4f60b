"""Shared fixtures: one contract suite runs on DuckDB and on PostgreSQL.

PostgreSQL comes from ``PRME_TEST_POSTGRES_DSN``. Outside CI an unset or unreachable server
skips the PostgreSQL half with a message; with ``CI=true`` it fails instead, never skips.
Each test gets its own PostgreSQL schema (dropped afterwards) and its own DuckDB file.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from prme_core.engine import MemoryClient
from prme_core.storage import Store, open_store
from tests import locomo_data, tiers

POSTGRES_ENV = "PRME_TEST_POSTGRES_DSN"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
BACKENDS = ["duckdb", "postgres"]


def _postgres_dsn() -> str:
    dsn = os.environ.get(POSTGRES_ENV)
    if not dsn:
        if IN_CI:
            pytest.fail(f"{POSTGRES_ENV} is not set; CI must test PostgreSQL (see .ci/run)")
        pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL contract tests skipped outside CI")
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=5):
            pass
    except Exception as exc:  # noqa: BLE001 - any connection failure means the same thing here
        if IN_CI:
            pytest.fail(f"PostgreSQL at {POSTGRES_ENV} is unreachable under CI: {exc}")
        pytest.skip(f"PostgreSQL at {POSTGRES_ENV} is unreachable: {exc}")
    return dsn


def _with_schema(dsn: str, schema: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}prme_schema={schema}"


def _postgres_schema_url() -> Iterator[str]:
    """A PostgreSQL store URL in a fresh schema, dropped once the caller resumes the generator."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield _with_schema(_postgres_dsn(), schema)
    import psycopg

    with psycopg.connect(os.environ[POSTGRES_ENV], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL on each backend; PostgreSQL schemas are dropped afterwards."""
    if request.param == "duckdb":
        yield f"duckdb:///{tmp_path / 'store' / 'prme.duckdb'}"
        return
    yield from _postgres_schema_url()


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL store URL only (for tests about server-side concurrency)."""
    yield from _postgres_schema_url()


@pytest.fixture
def open_store_at(store_url: str) -> Iterator[Callable[[], Store]]:
    """Open (and later close) stores at the test's URL; call it again to 'restart'."""
    opened: list[Store] = []

    def _open() -> Store:
        store = open_store(store_url)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def client(store_url: str) -> Iterator[MemoryClient]:
    with MemoryClient(store_url) as c:
        yield c


@pytest.fixture(autouse=True)
def every_new_receipt_pool_replays(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every receipt a retrieval writes during a test is checked before it is persisted: a
    complete, replayable recorded pool (version 10 or later) re-ranked under the recorded weights must reproduce the
    returned ids, scores and applied weights (``retrieval.pool_replay.check_pool_replay``).
    Retrieval swallows persistence errors, so failures are collected and fail the test here."""
    from prme_core.retrieval import pipeline
    from prme_core.retrieval.pool_replay import check_pool_replay

    failures: list[str] = []
    persist = pipeline.persist_receipt

    def checked(store, receipt):  # type: ignore[no-untyped-def]
        try:
            check_pool_replay(receipt)
        except Exception as exc:  # noqa: BLE001 - reported below with the receipt's identity
            failures.append(f"{receipt.request_id}: {type(exc).__name__}: {exc}")
        return persist(store, receipt)

    monkeypatch.setattr(pipeline, "persist_receipt", checked)
    yield failures
    assert not failures, "pool replay did not reproduce new receipts:\n" + "\n".join(failures)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tiers.assign(items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("locomo") is not None and not locomo_data.PRESENT:
        if IN_CI:
            pytest.fail(f"{locomo_data.MISSING}; CI must run the LoCoMo tests (.ci/run looks for the data)")
        pytest.skip(locomo_data.MISSING)
