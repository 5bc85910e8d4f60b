"""HTTP load benchmark (issue 18): concurrent clients send a mix of retrievals and relevance
feedback to ``prme serve`` for one owner with 10,000 memories, and the same mix runs in process
through ``MemoryEngine`` in the same run, so the HTTP cost is a ratio, not a raw number.

Each client alternates: retrieve a query, then record a label on that retrieval (the first
result relevant, the second not). Latency is per request, client side, over keep-alive
connections; the server is a separate process (``python -m prme_assets.cli serve``) and every
HTTP request authenticates its API key. On DuckDB the two arms run one after the other (one
process holds the file); the in-process arm runs first.

Run: ``python -m benchmarks.http [--backends duckdb,postgres] [--memories 10000] [--clients 8]
[--requests 500]``. Target: 0 errors; HTTP p50 ≤ 1.5 × in-process p50.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import bench_store_url, percentile, python_calibration_ms, row
from benchmarks.retrieval import corpus_and_queries
from prme_core.engine import MemoryClient, MemoryEngine

OWNER = "http-bench-owner"


@dataclass
class Arm:
    """Latencies (ms) of one arm, by request kind, and its errors."""

    name: str
    retrieve: list[float] = field(default_factory=list)
    feedback: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def all(self) -> list[float]:
        return self.retrieve + self.feedback


Retrieve = Callable[[str], Awaitable[tuple[str, list[str]]]]
Feedback = Callable[[str, dict[str, bool]], Awaitable[None]]


async def _client(arm: Arm, queries: list[str], requests: int, retrieve: Retrieve, feedback: Feedback) -> None:
    last: tuple[str, list[str]] | None = None
    for i in range(requests):
        start = time.perf_counter()
        try:
            if i % 2 == 0 or last is None or len(last[1]) < 2:
                last = await retrieve(queries[i % len(queries)])
                kind = arm.retrieve
            else:
                request_id, nodes = last
                await feedback(request_id, {nodes[0]: True, nodes[1]: False})
                kind = arm.feedback
        except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
            arm.errors.append(f"{type(exc).__name__}: {exc}")
            continue
        kind.append((time.perf_counter() - start) * 1000.0)


async def _run(arm: Arm, clients: int, queries: list[str], requests: int, make) -> Arm:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    await asyncio.gather(*(_client(arm, queries[c::clients] or queries, requests, *make(c)) for c in range(clients)))
    arm.wall_s = time.perf_counter() - start
    return arm


async def in_process(url: str, clients: int, queries: list[str], requests: int) -> Arm:
    async with MemoryEngine(url) as engine:

        def make(_: int):  # type: ignore[no-untyped-def]
            async def retrieve(query: str) -> tuple[str, list[str]]:
                response = await engine.retrieve(query, owner=OWNER, limit=10)  # type: ignore[attr-defined]
                if not response.metadata.receipt_persisted:
                    raise RuntimeError(f"receipt not persisted: {response.metadata.receipt_error}")
                return str(response.metadata.request_id), [str(r.node_id) for r in response.results]

            async def feedback(request_id: str, labels: dict[str, bool]) -> None:
                await engine.record_relevance(request_id, labels, owner=OWNER, method="explicit_user")  # type: ignore[attr-defined]

            return retrieve, feedback

        await make(0)[0](queries[0])  # warm the corpus cache, as the server's first request does
        return await _run(Arm("in-process"), clients, queries, requests, make)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(url: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    command = [
        sys.executable,
        "-m",
        "prme_assets.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--store",
        url,
    ]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"prme serve exited: {server.stderr.read() if server.stderr else ''}")
        try:
            if httpx.get(f"{base}/v1/health", timeout=1.0).status_code == 200:
                return server, base
        except httpx.HTTPError:
            time.sleep(0.1)
    server.terminate()
    raise RuntimeError("prme serve did not answer /v1/health within 60 s")


async def over_http(base: str, api_key: str, clients: int, queries: list[str], requests: int) -> Arm:
    import httpx

    sessions = [
        httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {api_key}"}, timeout=120.0)
        for _ in range(clients)
    ]
    try:

        def make(c: int):  # type: ignore[no-untyped-def]
            http = sessions[c]

            async def retrieve(query: str) -> tuple[str, list[str]]:
                response = await http.post("/v1/retrieve", json={"query": query, "limit": 10, "include_context": True})
                response.raise_for_status()
                body = response.json()
                if not body["metadata"]["receipt_persisted"]:
                    raise RuntimeError(f"receipt not persisted: {body['metadata']['receipt_error']}")
                return body["metadata"]["request_id"], [r["node_id"] for r in body["results"]]

            async def feedback(request_id: str, labels: dict[str, bool]) -> None:
                response = await http.post("/v1/relevance", json={"request_id": request_id, "labels": labels})
                response.raise_for_status()

            return retrieve, feedback

        await make(0)[0](queries[0])  # warm the server's corpus cache
        return await _run(Arm("HTTP"), clients, queries, requests, make)
    finally:
        for http in sessions:
            await http.aclose()


def _report(arm: Arm) -> None:
    total = len(arm.all)
    print(
        f"  {arm.name}: {total:,} requests in {arm.wall_s:.1f} s ({total / arm.wall_s:,.0f}/s), {len(arm.errors)} errors"
    )
    for label, values in (("all", arm.all), ("retrieve", arm.retrieve), ("feedback", arm.feedback)):
        row(f"{arm.name} {label} p50", percentile(values, 0.5), "ms")
        row(f"{arm.name} {label} p95", percentile(values, 0.95), "ms")
    for error in arm.errors[:5]:
        print(f"    error: {error}")


def bench_backend(backend: str, memories: int, clients: int, requests: int) -> tuple[Arm, Arm]:
    items, queries = corpus_and_queries(memories, 400)
    with bench_store_url(backend) as url:
        with MemoryClient(url) as client:
            for start in range(0, len(items), 5000):
                client.store_batch(OWNER, items[start : start + 5000])
            api_key = client.create_api_key(OWNER).api_key
        load = os.getloadavg()
        local = asyncio.run(in_process(url, clients, queries, requests))
        server, base = _start_server(url)
        try:
            remote = asyncio.run(over_http(base, api_key, clients, queries, requests))
        finally:
            server.terminate()
            server.wait(timeout=30)
        print(
            f"{backend}: {memories:,} memories, {clients} clients × {requests} requests (retrieve, then feedback on it); "
            f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, at end "
            + " ".join(f"{v:.2f}" for v in os.getloadavg())
        )
        _report(local)
        _report(remote)
        for label, kind in (("all requests", "all"), ("retrieve", "retrieve"), ("feedback", "feedback")):
            ratio = percentile(getattr(remote, kind), 0.5) / percentile(getattr(local, kind), 0.5)
            print(f"  HTTP p50 / in-process p50 ({label}): {ratio:.2f}×" + (" (target ≤ 1.5)" if kind == "all" else ""))
        return local, remote


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="duckdb", help="comma-separated: duckdb,postgres")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=500, help="requests per client")
    args = parser.parse_args(argv)
    print(f"python calibration: {python_calibration_ms():.1f} ms for sum(range(10**6))")
    failed = False
    for backend in args.backends.split(","):
        local, remote = bench_backend(backend.strip(), args.memories, args.clients, args.requests)
        failed = failed or bool(local.errors or remote.errors)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
