"""``MemoryEngine``: the asynchronous public API.

Each coroutine runs the matching ``MemoryClient`` method in a worker thread, so the event loop
never blocks on the database; both surfaces therefore share one contract.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from prme_core.engine.client import MemoryClient
from prme_core.settings import EngineSettings
from prme_core.storage import Store

ASYNC_METHODS: tuple[str, ...] = (
    "store_memory",
    "store_batch",
    "get",
    "history",
    "edges",
    "scan",
    "link",
    "supersede",
    "archive",
    "retrieve",
    "get_receipt",
    "record_relevance",
    "get_relevance",
    "list_relevance",
    "record_answer_citations",
    "get_answer_citations",
    "list_answer_citations",
    "snapshot_feedback",
    "evaluate_learning",
    "register_holdout_queries",
    "list_holdout_queries",
    "retire_holdout_queries",
    "memory_artifact_digest",
    "run_holdout",
    "evaluate_full_retrieval",
    "evaluate_holdout",
    "holdout_baseline",
    "holdout_look",
    "create_ranking_profile",
    "activate_ranking_profile",
    "deactivate_ranking_profile",
    "rollback_ranking_profile",
    "get_ranking_profile",
    "list_ranking_profiles",
    "get_active_ranking_profile",
    "ranking_profile_history",
    "ranking_profile_at",
    "create_api_key",
    "list_api_keys",
    "revoke_api_key",
    "authenticate",
)


def _async_method(name: str) -> Callable[..., Any]:
    sync = getattr(MemoryClient, name)

    @functools.wraps(sync)
    async def method(self: MemoryEngine, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.client, name), *args, **kwargs)

    return method


class MemoryEngine:
    """Asynchronous access to one PRME store; use ``async with MemoryEngine(...)``."""

    def __init__(
        self,
        store_url: str | None = None,
        *,
        settings: EngineSettings | None = None,
        store: Store | None = None,
        **pipeline_options: Any,
    ) -> None:
        self.client = MemoryClient(store_url, settings=settings, store=store, **pipeline_options)

    @property
    def settings(self) -> EngineSettings:
        return self.client.settings

    async def close(self) -> None:
        await asyncio.to_thread(self.client.close)

    async def __aenter__(self) -> MemoryEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


for _name in ASYNC_METHODS:
    setattr(MemoryEngine, _name, _async_method(_name))

# Pure functions over in-memory values: no I/O, so the engine exposes them as they are.
MemoryEngine.ablate_context = staticmethod(MemoryClient.ablate_context)  # type: ignore[attr-defined]
MemoryEngine.assess_context_presence = staticmethod(MemoryClient.assess_context_presence)  # type: ignore[attr-defined]
