"""Resources, chosen from environment variables in this one place.

``PRME_STORE_URL`` selects the domain store (default: the embedded DuckDB file) and
``PRME_EMBEDDING`` its semantic channel (``hashed``, the default, or ``minilm``);
``PRME_API_URL`` is where ``prme serve`` answers, which evidence links in metadata point at; the
``Orchestration`` variables pick the executor and the nightly schedule's cron and batch size. The learning
policy (gate thresholds and fit parameters) is a resource so every asset and check of a run
uses the same one; operators override it in run config, tests and the main job in code.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import dagster as dg
from pydantic import Field

from prme_core.engine import MemoryClient
from prme_core.errors import InvalidInput
from prme_core.learning.config import (
    POOL_DEFAULTS,
    PROPOSAL_DEFAULTS,
    RISK_DEFAULTS,
    SHRINKAGE_DEFAULTS,
    V3_DEFAULTS,
    LearningConfig,
)
from prme_core.learning.full_retrieval import DEFAULT_ALPHA_BUDGET, HARM_DEFAULTS, FullRetrievalEvaluationConfig
from prme_core.learning.snapshot import DEFAULT_MAX_RECORDS
from prme_core.retrieval.embedding import embedding_provider
from prme_core.settings import embedding_name_from_env
from prme_core.storage.url import DEFAULT_STORE_URL, STORE_URL_ENV
from prme_core.types import FrozenModel

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


def _default(config: type[FrozenModel], field: str) -> Any:
    """A field's default in a ``prme_core`` config: every threshold's default is defined there, once."""
    return config.model_fields[field].default


HOLDOUT_FIELDS = {
    "seed": "seed",
    "k": "holdout_k",
    "min_query_groups": "holdout_min_query_groups",
    "bootstrap_samples": "bootstrap_samples",
    "min_ndcg_gain": "holdout_min_ndcg_gain",
    "max_regression_fraction": "holdout_max_regression_fraction",
    "max_mean_harm": "holdout_max_mean_harm",
    "severe_loss": "holdout_severe_loss",
    "max_severe_share": "holdout_max_severe_share",
    "alpha_budget": "holdout_alpha_budget",
}
"""``FullRetrievalEvaluationConfig`` field → the policy field that sets it (seed and bootstrap
samples are shared with the offline proposal); every ``LearningConfig`` field has its own name."""


class LearningPolicyResource(dg.ConfigurableResource):
    """Fit parameters and gate thresholds of the offline proposal and the holdout. The defaults are
    ``LearningConfig``'s, ``FullRetrievalEvaluationConfig``'s and the snapshot's bound."""

    seed: int = _default(LearningConfig, "seed")
    validation_fraction: float = _default(LearningConfig, "validation_fraction")
    min_training_queries: int = _default(LearningConfig, "min_training_queries")
    min_validation_queries: int = _default(LearningConfig, "min_validation_queries")
    regularization: float = _default(LearningConfig, "regularization")
    margin_scale: float = _default(LearningConfig, "margin_scale")
    passes_per_step: int = _default(LearningConfig, "passes_per_step")
    ndcg_k: int = _default(LearningConfig, "ndcg_k")
    bootstrap_samples: int = _default(LearningConfig, "bootstrap_samples")
    min_ndcg_gain: float = _default(LearningConfig, "min_ndcg_gain")
    max_pairs_per_request: int = _default(LearningConfig, "max_pairs_per_request")
    fit: str = POOL_DEFAULTS["fit"]
    family: str = POOL_DEFAULTS["family"]
    pool_regularization: float = POOL_DEFAULTS["pool_regularization"]
    max_fit_requests: int = POOL_DEFAULTS["max_fit_requests"]
    search_starts: int = POOL_DEFAULTS["search_starts"]
    max_p_value: float = POOL_DEFAULTS["max_p_value"]
    ndcg_margin: float = POOL_DEFAULTS["ndcg_margin"]
    max_group_requests: int = POOL_DEFAULTS["max_group_requests"]
    crossfit_folds: int = V3_DEFAULTS["crossfit_folds"]
    shrinkage_folds: int = SHRINKAGE_DEFAULTS["shrinkage_folds"]  # type: ignore[assignment]
    shrinkage_grid: list[float] = list(SHRINKAGE_DEFAULTS["shrinkage_grid"])  # type: ignore[call-overload]
    """Factors a pool proposal may be shrunk toward the identity by (ending at 1.0; ``[1.0]``: off)."""
    shrinkage_risk_aversion: float = RISK_DEFAULTS["shrinkage_risk_aversion"]
    """A risk-averse choice of that factor: the inner folds' held-out NDCG less this multiple of
    their held-out harm (0 to 10; 1 by default; 0: the best held-out NDCG alone, risk-neutral)."""
    proposal_check: str = PROPOSAL_DEFAULTS["proposal_check"]
    """What the offline gate asks of the proposal's own validation gain: ``interval`` (its bootstrap
    interval reaches 0) or ``mean`` (its mean is not negative)."""
    max_records: int = DEFAULT_MAX_RECORDS
    holdout_k: int = _default(FullRetrievalEvaluationConfig, "k")
    holdout_min_query_groups: int = _default(FullRetrievalEvaluationConfig, "min_query_groups")
    holdout_min_ndcg_gain: float = _default(FullRetrievalEvaluationConfig, "min_ndcg_gain")
    holdout_max_regression_fraction: float = _default(FullRetrievalEvaluationConfig, "max_regression_fraction")
    holdout_max_mean_harm: float = HARM_DEFAULTS["max_mean_harm"]
    holdout_severe_loss: float = HARM_DEFAULTS["severe_loss"]
    holdout_max_severe_share: float = HARM_DEFAULTS["max_severe_share"]
    holdout_alpha_budget: float = DEFAULT_ALPHA_BUDGET
    """The error budget every holdout look of a partition and baseline shares: spent over the
    partition's recorded proposals (``gates.holdout_level``; version-3 reports: the k-th look
    spends ``budget / (k (k + 1))``)."""

    def learning_config(self) -> LearningConfig:
        return LearningConfig(**{field: getattr(self, field) for field in LearningConfig.model_fields})

    def holdout_config(self, **overrides: Any) -> FullRetrievalEvaluationConfig:
        values = {field: getattr(self, name) for field, name in HOLDOUT_FIELDS.items()}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return FullRetrievalEvaluationConfig(**values)


API_URL_ENV = "PRME_API_URL"
DEFAULT_API_URL = "http://127.0.0.1:8000"
"""Where ``prme serve`` listens by default."""


def api_url_from_env() -> str:
    """The HTTP API's base URL that metadata links to records point at (``PRME_API_URL``, else
    ``prme serve``'s default address). Read when the metadata is written."""
    return (os.environ.get(API_URL_ENV) or "").strip() or DEFAULT_API_URL


def store_url_from_env() -> str:
    return os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL


def store_resource_from_env() -> PrmeStoreResource:
    """``PRME_STORE_URL`` if set, else the embedded DuckDB default; ``PRME_EMBEDDING`` likewise."""
    return PrmeStoreResource(store_url=store_url_from_env(), embedding=embedding_name_from_env())


EXECUTOR_ENV = "PRME_EXECUTOR"
CELERY_BROKER_ENV = "PRME_CELERY_BROKER"
CELERY_BACKEND_ENV = "PRME_CELERY_BACKEND"
LEARNING_CRON_ENV = "PRME_LEARNING_CRON"
BATCH_SIZE_ENV = "PRME_LEARNING_BATCH_SIZE"
EXECUTORS = ("multiprocess", "celery")


class Orchestration(FrozenModel):
    """How the production code location runs: the executor of its jobs, the nightly schedule's
    cron and batch size. Defaults: the multiprocess executor, 03:00 UTC, 50 partitions a run."""

    executor: Literal["multiprocess", "celery"] = "multiprocess"
    celery_broker_from_env: bool = False
    """Whether ``PRME_CELERY_BROKER`` is set: the executor then reads it at launch (run config
    names the variable, never a password); otherwise the local RabbitMQ default."""
    celery_backend: str = "rpc://"
    learning_cron: str = "0 3 * * *"
    batch_size: int = Field(default=50, ge=1, le=10_000)


def orchestration_from_env() -> Orchestration:
    """``PRME_EXECUTOR`` (multiprocess | celery), ``PRME_CELERY_BROKER``, ``PRME_CELERY_BACKEND``,
    ``PRME_LEARNING_CRON`` and ``PRME_LEARNING_BATCH_SIZE``; unset means the default."""
    env = {
        k: os.environ.get(k, "").strip() for k in (EXECUTOR_ENV, CELERY_BACKEND_ENV, LEARNING_CRON_ENV, BATCH_SIZE_ENV)
    }
    if env[EXECUTOR_ENV] and env[EXECUTOR_ENV] not in EXECUTORS:
        raise InvalidInput(EXECUTOR_ENV, f"{env[EXECUTOR_ENV]!r} is not one of {', '.join(EXECUTORS)}")
    if env[BATCH_SIZE_ENV] and not env[BATCH_SIZE_ENV].isdigit():
        raise InvalidInput(BATCH_SIZE_ENV, f"{env[BATCH_SIZE_ENV]!r} is not a whole number of partitions")
    values: dict[str, Any] = {"celery_broker_from_env": bool(os.environ.get(CELERY_BROKER_ENV, "").strip())}
    for field, name in (
        ("executor", EXECUTOR_ENV),
        ("celery_backend", CELERY_BACKEND_ENV),
        ("learning_cron", LEARNING_CRON_ENV),
        ("batch_size", BATCH_SIZE_ENV),
    ):
        if env[name]:
            values[field] = env[name]
    return Orchestration(**values)
