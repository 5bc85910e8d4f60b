"""PRME Learning: a memory engine whose ranking learns per owner and scope from explicit
feedback, only through evaluated, versioned, reversible ranking profiles."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prme_core.engine import MemoryClient, MemoryEngine
    from prme_core.memory.models import (
        EdgeType,
        EpistemicType,
        Lifecycle,
        MemoryInput,
        MemoryNode,
        NodeType,
    )
    from prme_core.settings import EngineSettings

_EXPORTS = {
    "MemoryClient": "prme_core.engine",
    "MemoryEngine": "prme_core.engine",
    "EdgeType": "prme_core.memory.models",
    "EpistemicType": "prme_core.memory.models",
    "Lifecycle": "prme_core.memory.models",
    "MemoryInput": "prme_core.memory.models",
    "MemoryNode": "prme_core.memory.models",
    "NodeType": "prme_core.memory.models",
    "EngineSettings": "prme_core.settings",
}
__all__ = [
    "EdgeType",
    "EngineSettings",
    "EpistemicType",
    "Lifecycle",
    "MemoryClient",
    "MemoryEngine",
    "MemoryInput",
    "MemoryNode",
    "NodeType",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """The public names load on first use, so ``import prme_core.storage.url`` (the ``prme``
    command's help, say) does not import the engine, numpy and the retrieval stack."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'prme_core' has no attribute {name!r}")
