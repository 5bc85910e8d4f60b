"""The API test harness: a real uvicorn server on 127.0.0.1 (an ephemeral port, in a thread of
the test process, so tests can count rows in the same store) per module and backend."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import psycopg
import pytest
import uvicorn

from prme_api.http import create_app
from prme_api.service import MemoryService
from prme_core.engine import MemoryClient, MemoryEngine
from tests.conftest import BACKENDS, POSTGRES_ENV, _postgres_dsn, _with_schema

TABLES = ("operations", "memory_node_versions", "memory_edges", "receipt_projections", "ranking_pointer_heads")
SMALL_BODY_LIMIT = 256 * 1024  # the servers under test refuse larger bodies (413)


def row_counts(client: MemoryClient) -> dict[str, int]:
    """Rows of every table a request could write (the append-only log first)."""
    with client.store.transaction() as tx:
        return {t: tx.conn.fetchall(f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}


@pytest.fixture(scope="module", params=BACKENDS)
def module_store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``store_url`` for a whole module: one fresh store per backend, shared by its tests."""
    if request.param == "duckdb":
        yield f"duckdb:///{tmp_path_factory.mktemp('api') / 'prme.duckdb'}"
        return
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield _with_schema(_postgres_dsn(), schema)
    with psycopg.connect(os.environ[POSTGRES_ENV], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@dataclass
class ApiServer:
    """A running server: its base URL, and the engine's sync client for setup and row counts."""

    url: str
    client: MemoryClient

    def http(self, api_key: str | None = None) -> httpx.Client:
        headers = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)

    def rows(self) -> dict[str, int]:
        return row_counts(self.client)


def serve_in_thread(app: object) -> tuple[uvicorn.Server, threading.Thread, str]:
    """Start uvicorn for ``app`` on an ephemeral 127.0.0.1 port; return it once it accepts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the API server did not start")
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def api(module_store_url: str) -> Iterator[ApiServer]:
    engine = MemoryEngine(module_store_url)
    server, thread, url = serve_in_thread(create_app(MemoryService(engine), max_body_bytes=SMALL_BODY_LIMIT))
    try:
        yield ApiServer(url, engine.client)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        engine.client.close()
