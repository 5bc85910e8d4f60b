"""Entry points of ``prme serve`` and ``prme mcp``: open the engine, serve, close it."""

from __future__ import annotations

import asyncio
from importlib.metadata import PackageNotFoundError, version

from prme_api.http import DEFAULT_MAX_BODY_BYTES, create_app
from prme_api.service import MemoryService
from prme_core.engine import MemoryEngine


def package_version() -> str:
    try:
        return version("prme-learning")
    except PackageNotFoundError:  # a checkout on sys.path without an install
        return "0.1.0"


def serve_http(store_url: str | None, *, host: str, port: int, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    """Serve ``/v1`` and ``/mcp`` with uvicorn until interrupted."""
    import uvicorn

    async def main() -> None:
        async with MemoryEngine(store_url) as engine:
            app = create_app(MemoryService(engine), max_body_bytes=max_body_bytes, version=package_version())
            config = uvicorn.Config(app, host=host, port=port, log_level="info", access_log=False)
            await uvicorn.Server(config).serve()

    asyncio.run(main())


def serve_mcp_stdio(store_url: str | None, api_key: str) -> None:
    """Serve MCP over stdio for the owner of ``api_key`` until the client closes the stream."""
    from prme_api.mcp import serve_stdio

    async def main() -> None:
        async with MemoryEngine(store_url) as engine:
            await serve_stdio(MemoryService(engine), api_key, version=package_version())

    asyncio.run(main())
