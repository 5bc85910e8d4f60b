"""Configuration of the offline proposal evaluation (saved in every report)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from prme_core.types import FrozenModel

DEFAULT_SEED = 42
"""Seeds the split hash and every bootstrap; also the holdout's default (``FullRetrievalEvaluationConfig``)."""
DEFAULT_BOOTSTRAP_SAMPLES = 2000
"""Bootstrap resamples of the offline and the holdout interval."""


class LearningConfig(FrozenModel):
    """Loss parameters and acceptance thresholds: provisional, and recorded with every result."""

    seed: int = DEFAULT_SEED
    validation_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.3
    min_training_queries: Annotated[int, Field(ge=2)] = 20
    min_validation_queries: Annotated[int, Field(ge=2)] = 20
    regularization: Annotated[float, Field(gt=0.0)] = 0.01
    margin_scale: Annotated[float, Field(gt=0.0, le=100.0)] = 5.0
    passes_per_step: Annotated[int, Field(ge=1, le=20)] = 4
    ndcg_k: Annotated[int, Field(ge=1, le=1000)] = 10
    bootstrap_samples: Annotated[int, Field(ge=100, le=10_000)] = DEFAULT_BOOTSTRAP_SAMPLES
    min_ndcg_gain: Annotated[float, Field(ge=0.0, le=1.0)] = 0.01
    max_pairs_per_request: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000
