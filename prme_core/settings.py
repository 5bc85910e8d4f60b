"""Engine settings: the one place environment variables are read."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field

from prme_core.memory.models import DEFAULT_SCOPES, ScopeName
from prme_core.retrieval.bm25 import Bm25Parameters
from prme_core.retrieval.config import PackingConfig, ScoringWeights
from prme_core.storage.url import DEFAULT_STORE_URL, STORE_URL_ENV
from prme_core.types import FrozenModel, Unique

SCOPES_ENV = "PRME_SCOPES"
EMBEDDING_ENV = "PRME_EMBEDDING"
"""Embedding provider name (``prme_core.retrieval.embedding.EMBEDDING_PROVIDERS``); default hashed."""


def embedding_name_from_env() -> str:
    return os.environ.get(EMBEDDING_ENV, "").strip() or "hashed"


class EngineSettings(FrozenModel):
    """What an engine is configured with. Immutable: no tenant action changes it."""

    store_url: str = DEFAULT_STORE_URL
    scopes: Annotated[tuple[ScopeName, ...], Field(min_length=1, max_length=64), Unique] = DEFAULT_SCOPES
    scoring: ScoringWeights = Field(default_factory=ScoringWeights)
    packing: PackingConfig = Field(default_factory=PackingConfig)
    bm25: Bm25Parameters = Field(default_factory=Bm25Parameters)
    """The lexical index's BM25 parameters; recorded in every receipt's feature identity."""

    @classmethod
    def from_env(cls, **overrides: object) -> EngineSettings:
        """Settings from ``PRME_STORE_URL`` and ``PRME_SCOPES`` (comma-separated), then overrides."""
        values: dict[str, object] = {}
        if os.environ.get(STORE_URL_ENV):
            values["store_url"] = os.environ[STORE_URL_ENV]
        if os.environ.get(SCOPES_ENV):
            values["scopes"] = tuple(s.strip() for s in os.environ[SCOPES_ENV].split(",") if s.strip())
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
