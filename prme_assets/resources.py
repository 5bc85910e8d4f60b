"""Resources, chosen from environment variables in this one place.

``PRME_STORE_URL`` selects the domain store (default: the embedded DuckDB file) and
``PRME_EMBEDDING`` its semantic channel (``hashed``, the default, or ``minilm``). The learning
policy (gate thresholds and fit parameters) is a resource so every asset and check of a run
uses the same one; operators override it in run config, tests and the main job in code.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import dagster as dg

from prme_core.engine import MemoryClient
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import FullRetrievalEvaluationConfig
from prme_core.retrieval.embedding import embedding_provider
from prme_core.settings import embedding_name_from_env
from prme_core.storage.url import DEFAULT_STORE_URL, STORE_URL_ENV

STORE_POOL = "prme_store"
"""Concurrency pool of every step that opens the domain store (limit it to 1 for DuckDB)."""


class PrmeStoreResource(dg.ConfigurableResource):
    """The domain store. Each step opens it, works and closes it, so a DuckDB file can be shared
    by the steps of a multiprocess run (they take turns through the ``prme_store`` pool and,
    failing that, wait for each other's file lock)."""

    store_url: str = DEFAULT_STORE_URL
    embedding: Literal["hashed", "minilm"] = "hashed"
    """The semantic channel every step retrieves with. A profile records the feature identity it
    learned under, so switching providers makes existing profiles inapplicable, never wrong."""

    @contextmanager
    def client(self) -> Iterator[MemoryClient]:
        with MemoryClient(self.store_url, embedder=embedding_provider(self.embedding)) as client:
            yield client


class LearningPolicyResource(dg.ConfigurableResource):
    """Fit parameters and gate thresholds of the offline proposal and the holdout."""

    seed: int = 42
    validation_fraction: float = 0.3
    min_training_queries: int = 20
    min_validation_queries: int = 20
    regularization: float = 0.01
    margin_scale: float = 5.0
    passes_per_step: int = 4
    ndcg_k: int = 10
    bootstrap_samples: int = 2000
    min_ndcg_gain: float = 0.01
    max_pairs_per_request: int = 10_000
    max_records: int = 10_000
    holdout_k: int = 10
    holdout_min_query_groups: int = 20
    holdout_min_ndcg_gain: float = 0.01
    holdout_max_regression_fraction: float = 0.1

    def learning_config(self) -> LearningConfig:
        return LearningConfig(
            seed=self.seed, validation_fraction=self.validation_fraction,
            min_training_queries=self.min_training_queries, min_validation_queries=self.min_validation_queries,
            regularization=self.regularization, margin_scale=self.margin_scale, passes_per_step=self.passes_per_step,
            ndcg_k=self.ndcg_k, bootstrap_samples=self.bootstrap_samples, min_ndcg_gain=self.min_ndcg_gain,
            max_pairs_per_request=self.max_pairs_per_request)

    def holdout_config(self, **overrides: Any) -> FullRetrievalEvaluationConfig:
        values = dict(seed=self.seed, k=self.holdout_k, min_query_groups=self.holdout_min_query_groups,
                      bootstrap_samples=self.bootstrap_samples, min_ndcg_gain=self.holdout_min_ndcg_gain,
                      max_regression_fraction=self.holdout_max_regression_fraction)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return FullRetrievalEvaluationConfig(**values)


def store_url_from_env() -> str:
    return os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL


def store_resource_from_env() -> PrmeStoreResource:
    """``PRME_STORE_URL`` if set, else the embedded DuckDB default; ``PRME_EMBEDDING`` likewise."""
    return PrmeStoreResource(store_url=store_url_from_env(), embedding=embedding_name_from_env())
