"""The full-retrieval holdout's configuration: metric cut-off, coverage minimum, bootstrap and
acceptance thresholds, and the error budget its looks spend (``gates.holdout_level``,
``gates.look_alpha``); every report records it resolved."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from prme_core.errors import InvalidInput
from prme_core.learning.config import DEFAULT_BOOTSTRAP_SAMPLES, DEFAULT_SEED
from prme_core.learning.gates import DEFAULT_LEVEL_CAP, TOLERANCE, holdout_level, look_alpha
from prme_core.types import EvolvingModel

HARM_DEFAULTS = {"max_mean_harm": 0.02, "severe_loss": 0.5, "max_severe_share": 0.05, "max_p_value": 0.025}
"""The regression bounds a version-2 report records when the caller leaves them unset: at most
0.02 NDCG lost per query on average to regressions, and at most 5% of the groups losing 0.5 or
more (in NDCG@10 with one relevant memory, 0.5 is falling from first place to third or lower),
and the groups' paired sign-flip test at most p = 0.025 (one-sided)."""
DEFAULT_ALPHA_BUDGET = 0.05
"""The error budget of a partition's holdout: every look together may accept a proposal without
a true gain with probability at most 5%. Version 4 spends it over the partition's proposals,
counting the offline gate each passed first (``gates.holdout_level``: 2.5% for each of the first
twenty proposals' first looks); version 3 over the holdout's looks alone (the k-th look
``gates.look_alpha(0.05, k)``: 2.5%, then 0.83%, 0.42%, …)."""


class FullRetrievalEvaluationConfig(EvolvingModel):
    """Metric cut-off, coverage minimum, bootstrap and acceptance thresholds (saved in every report).

    ``max_regression_fraction`` bounds version-1 reports only; version-2 reports bound the harm
    of regressions instead (``max_mean_harm``, ``severe_loss``, ``max_severe_share``: None until
    a report records them resolved, so a version-1 report's configuration keeps its bytes).
    Version-3 reports also record which ``look`` at the partition's holdout they were and the
    ``alpha_budget`` the looks share; their ``max_p_value`` is the level that look may spend
    (``gates.look_alpha``), derived, never set by a caller. Version-4 reports also record the
    proposal's ``offline_look`` (its number among the partition's recorded proposals), the
    ``offline_alpha`` its offline gate tested at and the ``level_cap``; their ``max_p_value`` is
    ``gates.holdout_level`` of those and the look (then numbered among the looks at that one
    proposal and baseline)."""

    ADDED_FIELDS: ClassVar[tuple[str, ...]] = (
        *HARM_DEFAULTS,
        "look",
        "alpha_budget",
        "offline_look",
        "offline_alpha",
        "level_cap",
    )

    seed: int = Field(default=DEFAULT_SEED, ge=0, le=2**63 - 1)
    k: int = Field(default=10, ge=1, le=1000)
    min_query_groups: int = Field(default=20, ge=2, le=100_000)
    bootstrap_samples: int = Field(default=DEFAULT_BOOTSTRAP_SAMPLES, ge=100, le=10_000)
    min_ndcg_gain: float = Field(default=0.01, ge=0.0, le=1.0)
    max_regression_fraction: float = Field(default=0.1, ge=0.0, le=1.0)
    max_mean_harm: float | None = Field(default=None, ge=0.0, le=1.0)
    severe_loss: float | None = Field(default=None, gt=0.0, le=1.0)
    max_severe_share: float | None = Field(default=None, ge=0.0, le=1.0)
    max_p_value: float | None = Field(default=None, gt=0.0, le=1.0)
    look: int | None = Field(default=None, ge=1, le=1_000_000)
    alpha_budget: float | None = Field(default=None, gt=0.0, le=0.5)
    offline_look: int | None = Field(default=None, ge=1, le=1_000_000)
    offline_alpha: float | None = Field(default=None, gt=0.0, le=1.0)
    level_cap: float | None = Field(default=None, gt=0.0, le=0.5)

    @property
    def sequential(self) -> bool:
        """A version-3 or -4 configuration: the holdout confirms within a spent error budget."""
        return self.look is not None

    @property
    def per_proposal(self) -> bool:
        """A version-4 configuration: the budget is spent over the partition's proposals."""
        return self.offline_look is not None

    def level(self) -> float:
        """The level a version-3 or -4 configuration's look may test at."""
        assert self.look is not None and self.alpha_budget is not None
        if self.offline_look is None:
            return look_alpha(self.alpha_budget, self.look)
        assert self.offline_alpha is not None and self.level_cap is not None
        return holdout_level(
            self.offline_look, self.look, budget=self.alpha_budget, offline_alpha=self.offline_alpha, cap=self.level_cap
        )

    def resolved(
        self, *, look: int | None = None, offline_look: int | None = None, offline_alpha: float | None = None
    ) -> FullRetrievalEvaluationConfig:
        """This configuration as a version-3 or -4 report records it: every bound explicit,
        ``look`` (given here, by the store's count; else the configuration's, else 1) and the
        level it may spend. ``offline_look`` and ``offline_alpha`` (the store's number of the
        proposal and its offline gate's level) make it version 4."""
        budget = DEFAULT_ALPHA_BUDGET if self.alpha_budget is None else self.alpha_budget
        number = look if look is not None else (self.look or 1)
        offline_look = offline_look if offline_look is not None else self.offline_look
        offline_alpha = offline_alpha if offline_alpha is not None else self.offline_alpha
        if (offline_look is None) != (offline_alpha is None):
            raise InvalidInput("config.offline_look", "and config.offline_alpha are set together or not at all")
        if offline_look is None and self.level_cap is not None:
            raise InvalidInput("config.level_cap", "applies only with an offline look (a version-4 report)")
        cap = None if offline_look is None else (DEFAULT_LEVEL_CAP if self.level_cap is None else self.level_cap)
        update = {
            "look": number,
            "alpha_budget": budget,
            "offline_look": offline_look,
            "offline_alpha": offline_alpha,
            "level_cap": cap,
        }
        alpha = self.model_copy(update=update).level()
        if self.max_p_value is not None and abs(self.max_p_value - alpha) > TOLERANCE:
            raise InvalidInput(
                "config.max_p_value",
                f"is derived from alpha_budget and the look ({budget} over look {number} gives {alpha:.6g}); "
                "set alpha_budget instead",
            )
        harm = {k: v for k, v in HARM_DEFAULTS.items() if k != "max_p_value" and getattr(self, k) is None}
        return self.model_copy(update={**harm, **update, "max_p_value": alpha})

    def resolved_v2(self) -> FullRetrievalEvaluationConfig:
        """This configuration with every version-2 bound explicit (each look judged alone)."""
        return self.model_copy(update={k: v for k, v in HARM_DEFAULTS.items() if getattr(self, k) is None})
