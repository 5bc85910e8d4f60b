"""The public API: ``MemoryEngine`` (async) and ``MemoryClient`` (sync)."""

from prme_core.engine.client import MemoryClient
from prme_core.engine.engine import MemoryEngine

__all__ = ["MemoryClient", "MemoryEngine"]
