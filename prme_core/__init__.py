"""PRME Learning: a memory engine whose ranking learns per owner and scope from explicit
feedback, only through evaluated, versioned, reversible ranking profiles."""

from prme_core.engine import MemoryClient, MemoryEngine
from prme_core.memory.models import EdgeType, EpistemicType, Lifecycle, MemoryInput, MemoryNode, NodeType
from prme_core.settings import EngineSettings

__all__ = [
    "EdgeType", "EngineSettings", "EpistemicType", "Lifecycle", "MemoryClient", "MemoryEngine",
    "MemoryInput", "MemoryNode", "NodeType",
]
__version__ = "0.1.0"
