"""``MemoryEngine``: the asynchronous public API.

Each coroutine runs the matching ``MemoryClient`` method in a worker thread, so the event loop
never blocks on the database; both surfaces therefore share one contract.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from prme_core.engine.client import MemoryClient
from prme_core.settings import EngineSettings
from prme_core.storage import Store

P = ParamSpec("P")
R = TypeVar("R")


class _InThread(Generic[P, R]):
    """A ``MemoryClient`` method as a coroutine of the engine: the call runs in a worker thread,
    so the event loop never blocks on the database. Typed as the client method it wraps."""

    def __init__(self, method: Callable[Concatenate[MemoryClient, P], R]) -> None:
        self.method = method
        self.__doc__ = method.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, engine: None, owner: type) -> _InThread[P, R]: ...
    @overload
    def __get__(self, engine: MemoryEngine, owner: type) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, engine: MemoryEngine | None, owner: type) -> Any:
        if engine is None:
            return self
        bound = getattr(engine.client, self.name)

        @functools.wraps(self.method)
        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await asyncio.to_thread(bound, *args, **kwargs)

        return call


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

    # Every I/O method of MemoryClient, as a coroutine (one worker-thread call each).
    store_memory = _InThread(MemoryClient.store_memory)
    store_batch = _InThread(MemoryClient.store_batch)
    get = _InThread(MemoryClient.get)
    history = _InThread(MemoryClient.history)
    edges = _InThread(MemoryClient.edges)
    scan = _InThread(MemoryClient.scan)
    link = _InThread(MemoryClient.link)
    supersede = _InThread(MemoryClient.supersede)
    archive = _InThread(MemoryClient.archive)
    delete_memory = _InThread(MemoryClient.delete_memory)
    forget_owner = _InThread(MemoryClient.forget_owner)
    deletion_records = _InThread(MemoryClient.deletion_records)
    vacuum = _InThread(MemoryClient.vacuum)
    apply_receipt_retention = _InThread(MemoryClient.apply_receipt_retention)
    retrieve = _InThread(MemoryClient.retrieve)
    get_receipt = _InThread(MemoryClient.get_receipt)
    record_relevance = _InThread(MemoryClient.record_relevance)
    record_agent_judgment = _InThread(MemoryClient.record_agent_judgment)
    get_relevance = _InThread(MemoryClient.get_relevance)
    list_relevance = _InThread(MemoryClient.list_relevance)
    record_answer_citations = _InThread(MemoryClient.record_answer_citations)
    get_answer_citations = _InThread(MemoryClient.get_answer_citations)
    list_answer_citations = _InThread(MemoryClient.list_answer_citations)
    snapshot_feedback = _InThread(MemoryClient.snapshot_feedback)
    evaluate_learning = _InThread(MemoryClient.evaluate_learning)
    register_holdout_queries = _InThread(MemoryClient.register_holdout_queries)
    list_holdout_queries = _InThread(MemoryClient.list_holdout_queries)
    retire_holdout_queries = _InThread(MemoryClient.retire_holdout_queries)
    memory_artifact_digest = _InThread(MemoryClient.memory_artifact_digest)
    run_holdout = _InThread(MemoryClient.run_holdout)
    evaluate_full_retrieval = _InThread(MemoryClient.evaluate_full_retrieval)
    evaluate_holdout = _InThread(MemoryClient.evaluate_holdout)
    holdout_baseline = _InThread(MemoryClient.holdout_baseline)
    holdout_look = _InThread(MemoryClient.holdout_look)
    judge_holdout = _InThread(MemoryClient.judge_holdout)
    create_ranking_profile = _InThread(MemoryClient.create_ranking_profile)
    activate_ranking_profile = _InThread(MemoryClient.activate_ranking_profile)
    deactivate_ranking_profile = _InThread(MemoryClient.deactivate_ranking_profile)
    rollback_ranking_profile = _InThread(MemoryClient.rollback_ranking_profile)
    get_ranking_profile = _InThread(MemoryClient.get_ranking_profile)
    list_ranking_profiles = _InThread(MemoryClient.list_ranking_profiles)
    get_active_ranking_profile = _InThread(MemoryClient.get_active_ranking_profile)
    ranking_profile_history = _InThread(MemoryClient.ranking_profile_history)
    ranking_profile_at = _InThread(MemoryClient.ranking_profile_at)
    create_api_key = _InThread(MemoryClient.create_api_key)
    list_api_keys = _InThread(MemoryClient.list_api_keys)
    revoke_api_key = _InThread(MemoryClient.revoke_api_key)
    authenticate = _InThread(MemoryClient.authenticate)

    # Pure functions over in-memory values: no I/O, so the engine exposes them as they are.
    ablate_context = staticmethod(MemoryClient.ablate_context)
    assess_context_presence = staticmethod(MemoryClient.assess_context_presence)

    async def close(self) -> None:
        await asyncio.to_thread(self.client.close)

    async def __aenter__(self) -> MemoryEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


ASYNC_METHODS: tuple[str, ...] = tuple(name for name, v in vars(MemoryEngine).items() if isinstance(v, _InThread))
"""The names of the engine's coroutines (what the HTTP and MCP surfaces may call)."""
