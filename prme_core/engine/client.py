"""``MemoryClient``: the synchronous public API (a context manager that owns its store)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prme_core.memory.bank import MemoryBank, MemoryLike
from prme_core.memory.models import Edge, EdgeType, MemoryNode, Page
from prme_core.settings import EngineSettings
from prme_core.storage import Store, open_store


class MemoryClient:
    """Synchronous access to one PRME store.

    ``MemoryClient()`` opens ``PRME_STORE_URL`` (default: the embedded DuckDB file
    ``.prme/prme.duckdb``); pass ``store_url`` or an open ``store`` to choose another.
    """

    def __init__(self, store_url: str | None = None, *, settings: EngineSettings | None = None,
                 store: Store | None = None) -> None:
        self.settings = settings or EngineSettings.from_env(store_url=store_url)
        self._owns_store = store is None
        self.store = store if store is not None else open_store(self.settings.store_url)
        self.memory = MemoryBank(self.store, self.settings)

    # --- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> "MemoryClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- memory -------------------------------------------------------------------------

    def store_memory(self, owner: str, item: MemoryLike) -> MemoryNode:
        """Store one memory (a string, a mapping or a ``MemoryInput``)."""
        return self.memory.store_one(owner, item)

    def store_batch(self, owner: str, items: Sequence[MemoryLike]) -> list[MemoryNode]:
        """Store up to 50,000 memories atomically."""
        return self.memory.store_batch(owner, items)

    def get(self, owner: str, node_id: Any) -> MemoryNode:
        """The current version of a node (``NodeNotFound`` for a missing or foreign id)."""
        return self.memory.get(owner, node_id)

    def history(self, owner: str, node_id: Any) -> list[MemoryNode]:
        """All versions of a node, oldest first."""
        return self.memory.history(owner, node_id)

    def edges(self, owner: str, node_id: Any) -> list[Edge]:
        """Edges touching a node."""
        return self.memory.edges(owner, node_id)

    def scan(self, owner: str, *, scopes: Sequence[str] | None = None, include_inactive: bool = False,
             cursor: str | None = None, limit: int = 100) -> Page:
        """One bounded page of the owner's nodes."""
        return self.memory.scan(owner, scopes=scopes, include_inactive=include_inactive, cursor=cursor, limit=limit)

    def iterate(self, owner: str, *, scopes: Sequence[str] | None = None, include_inactive: bool = False,
                page_size: int = 500) -> Iterator[MemoryNode]:
        """Every node of the owner, page by page."""
        return self.memory.iterate(owner, scopes=scopes, include_inactive=include_inactive, page_size=page_size)

    def link(self, owner: str, source_id: Any, target_id: Any, edge_type: EdgeType | str = EdgeType.RELATES_TO,
             *, weight: float = 1.0, metadata: Mapping[str, Any] | None = None) -> Edge:
        """Add a typed edge between two of the owner's nodes."""
        return self.memory.link(owner, source_id, target_id, edge_type, weight=weight, metadata=metadata)

    def supersede(self, owner: str, node_id: Any, replacement: MemoryLike) -> MemoryNode:
        """Replace a node with a new one; the old one becomes a superseded version."""
        return self.memory.supersede(owner, node_id, replacement)

    def archive(self, owner: str, node_id: Any) -> MemoryNode:
        """Archive a node (a new version; history kept)."""
        return self.memory.archive(owner, node_id)
