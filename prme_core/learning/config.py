"""Configuration of the offline proposal evaluation (saved in every report)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from prme_core.retrieval.multipliers import FAMILY_V2, ProfileFamily
from prme_core.types import EvolvingModel

DEFAULT_SEED = 42
"""Seeds the split hash and every bootstrap; also the holdout's default (``FullRetrievalEvaluationConfig``)."""
DEFAULT_VALIDATION_FRACTION = 0.15
"""The fixed hash split's validation share. The offline gate judges every group (the validation
groups and the cross-fitted training groups), so the share mostly decides how many groups the
proposal is fitted on: at 0.15 it fits on 85% of them, and on the planted-effect power study a
10-night season reaches 80% activation at a true +0.03 with about 336 judged queries, against 606
at 0.3 (``benchmarks/results/power/``). The price is the coverage minimum: 20 validation
groups now take about 133 judged groups, not 67. Lowering the share only ever moves validation
groups into training, never a fitted group into validation."""
DEFAULT_BOOTSTRAP_SAMPLES = 2000
"""Bootstrap resamples of the offline and the holdout interval."""

FitMethod = Literal["auto", "pool_ndcg", "pool_pairwise", "judged_pairwise"]
"""How a proposal is fitted:

* ``pool_ndcg`` — re-rank each training request's recorded pool (pool replay) under candidate
  parameters and maximize judged NDCG@k directly (deterministic random starts, then coordinate
  ascent), regularized toward the base;
* ``pool_pairwise`` — the same pools and parameters, minimizing the pairwise logistic loss of
  explicit pairs instead (the named alternative);
* ``judged_pairwise`` — the version-1 method: pairwise logistic over the judged candidates'
  recorded features, six multipliers (receipts without a replayable pool);
* ``auto`` — ``pool_ndcg`` when every usable request has a complete, replayable pool, or when
  those that have one meet the coverage minimums (the others are excluded and counted); else
  ``judged_pairwise``.
"""

POOL_DEFAULTS = {
    "fit": "auto",
    "family": FAMILY_V2,
    "pool_regularization": 0.001,
    "max_fit_requests": 1000,
    "search_starts": 32,
    "max_p_value": 0.025,
    "max_group_requests": 20,
    "ndcg_margin": 0.02,
}
"""What a report records for the fields that came with version-2 reports when the caller leaves
them unset (the pool-fitting parameters and the sign-flip test's bound)."""
V3_DEFAULTS = {"crossfit_folds": 3}
"""What a version-3 report records when the caller leaves it unset: how many folds the training
groups are cross-fitted in (``crossfit_folds``)."""

ProposalCheck = Literal["mean", "interval"]
"""What the version-3 offline gate asks of the proposal itself on the validation groups (besides
its evidence): ``mean`` — its mean NDCG gain there is not negative (reports written before
``proposal_check`` existed); ``interval`` — its paired-bootstrap 95% interval there reaches 0 (the
upper endpoint is not negative: the proposal is not measurably worse). With a 15% validation share
the mean over a few dozen groups has the wrong sign for a true +0.02 proposal about one time in
six (the power study: 71 of 412 nightly proposals with a true gain of +0.015 to +0.025); the
interval refuses only a proposal the validation groups show to be worse."""
PROPOSAL_DEFAULTS: dict[str, ProposalCheck] = {"proposal_check": "interval"}
"""What a report written since ``proposal_check`` came records when the caller leaves it unset."""
SHRINKAGE_DEFAULTS = {"shrinkage_folds": 3, "shrinkage_grid": (0.5, 0.75, 1.0)}
"""What a report written since shrinkage came records when the caller leaves it unset: the
factors a pool proposal is shrunk toward the identity by, and the inner folds that choose one
(``pool_fit.shrunk_search``). A report without them was fitted without shrinkage."""
RISK_DEFAULTS = {"shrinkage_risk_aversion": 1.0}
"""What a report written since the risk-averse default records when the caller leaves the shrinkage
choice's risk aversion unset: 1, a unit of NDCG a group loses counted twice (``pool_fit``). On the
planted-effect power study a 10-night season reaches 80% activation at a true +0.03 with about 294
judged queries, against 336 risk-neutral, and no δ = 0 season of 125 per volume activated
(``benchmarks/results/power/averse.md``); on the development LoCoMo tenant the nightly schedule
activates where the risk-neutral learner never did. A report written before it records None
(risk-neutral) and keeps meaning that: only a new fit resolves the default; 0 chooses the
risk-neutral learner explicitly."""
MAX_SHRINKAGE_FACTORS = 21
MAX_RISK_AVERSION = 10.0
"""Upper bound of ``shrinkage_risk_aversion`` (losses counted up to 11 times the gains)."""


class LearningConfig(EvolvingModel):
    """Loss parameters and acceptance thresholds: provisional, and recorded with every result.

    The fields after ``max_pairs_per_request`` came with pool-replay fitting; they default to
    None (a version-1 report never records them) and a new report records them resolved
    (``POOL_DEFAULTS``), so every value that shaped a proposal is in it."""

    ADDED_FIELDS: ClassVar[tuple[str, ...]] = (
        *POOL_DEFAULTS,
        *V3_DEFAULTS,
        *SHRINKAGE_DEFAULTS,
        *PROPOSAL_DEFAULTS,
        *RISK_DEFAULTS,
    )

    seed: int = DEFAULT_SEED
    validation_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = DEFAULT_VALIDATION_FRACTION
    min_training_queries: Annotated[int, Field(ge=2)] = 20
    min_validation_queries: Annotated[int, Field(ge=2)] = 20
    regularization: Annotated[float, Field(gt=0.0)] = 0.01
    margin_scale: Annotated[float, Field(gt=0.0, le=100.0)] = 5.0
    passes_per_step: Annotated[int, Field(ge=1, le=20)] = 4
    ndcg_k: Annotated[int, Field(ge=1, le=1000)] = 10
    bootstrap_samples: Annotated[int, Field(ge=100, le=10_000)] = DEFAULT_BOOTSTRAP_SAMPLES
    min_ndcg_gain: Annotated[float, Field(ge=0.0, le=1.0)] = 0.01
    max_pairs_per_request: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000
    fit: FitMethod | None = None
    family: ProfileFamily | None = None
    """The profile family a pool fit searches (``multipliers_interactions_v2`` by default; the
    judged path always fits ``multipliers_v1``)."""
    pool_regularization: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    """Pool fits: the objective pays this times Σ (ln m)² + Σ ((β − β_base)/0.5)² (toward the base)."""
    max_fit_requests: Annotated[int, Field(ge=1, le=100_000)] | None = None
    """Pool fits re-rank at most this many training requests per evaluation: a deterministic
    sample spread over the training groups (by a seeded hash of the request id)."""
    search_starts: Annotated[int, Field(ge=0, le=1000)] | None = None
    """Pool fits: seeded random starting points tried before the coordinate ascent."""
    ndcg_margin: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    """Pool NDCG fits: a positive counts as ahead of another candidate only when it scores at least
    this much more (formula-1 scores lie in about [0, 1.3]); validation measures true NDCG."""
    max_group_requests: Annotated[int, Field(ge=1, le=100_000)] | None = None
    """Pool fits measure at most this many requests of a validation group (a seeded sample by
    request id; a group's metric is the mean over its requests and every group weighs the same,
    so a repeated query asked a thousand times need not be re-ranked a thousand times)."""
    max_p_value: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    """The offline gate's paired sign-flip test (one-sided) must give at most this p-value: over
    the validation groups and the cross-fitted training groups (version 3), over the validation
    groups beside a positive bootstrap bound (version 2)."""
    crossfit_folds: Annotated[int, Field(ge=2, le=10)] | None = None
    """Version 3: the training groups are split into this many folds by a fixed hash; each fold is
    judged by a proposal fitted on the other folds' training groups alone (never on validation
    groups), so every judged group, not only the validation share, is evidence for the gate."""

    shrinkage_folds: Annotated[int, Field(ge=2, le=10)] | None = None
    """Pool fits: the inner cross-validation folds (of the fit's own training groups) that choose
    the shrinkage factor."""
    shrinkage_grid: tuple[float, ...] | None = None
    """Pool fits: the factors the proposal (and each cross-fitting fold's) may be shrunk toward the
    identity by, increasing, in [0, 1], ending at 1 (the unshrunk search). ``[1.0]`` turns
    shrinkage off (the search's point, no inner fits)."""
    shrinkage_risk_aversion: Annotated[float, Field(ge=0.0, le=MAX_RISK_AVERSION)] | None = None
    """Pool fits: a risk-averse choice of the shrinkage factor. The inner folds also measure each
    factor's held-out harm (the judged NDCG the groups that lose give up against the identity,
    over all the groups), and the factor with the best held-out NDCG *less this multiple of its
    harm* wins: a unit a group loses counts 1 + this much, a unit gained once; 0 is the best
    held-out NDCG alone (risk-neutral). A new report records it resolved (``RISK_DEFAULTS``: 1);
    None in a report written before the default means risk-neutral, as those reports chose."""

    proposal_check: ProposalCheck | None = None
    """Version 3: what the offline gate asks of the proposal's own validation gain (``ProposalCheck``;
    None in a report written before the field: ``mean``)."""

    @field_validator("shrinkage_grid")
    @classmethod
    def _check_grid(cls, grid: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if grid is None:
            return None
        if not 1 <= len(grid) <= MAX_SHRINKAGE_FACTORS:
            raise ValueError(f"shrinkage_grid holds 1 to {MAX_SHRINKAGE_FACTORS} factors, got {len(grid)}")
        if any(not 0.0 <= f <= 1.0 for f in grid):
            raise ValueError("shrinkage_grid factors lie in [0, 1]")
        if any(b <= a for a, b in zip(grid, grid[1:])):
            raise ValueError("shrinkage_grid must be strictly increasing")
        if grid[-1] != 1.0:
            raise ValueError("shrinkage_grid must end at 1.0 (the unshrunk proposal is always a candidate)")
        return grid

    def resolved(self) -> LearningConfig:
        """This configuration with every field explicit (as a new report records it)."""
        defaults = {**POOL_DEFAULTS, **V3_DEFAULTS, **SHRINKAGE_DEFAULTS, **PROPOSAL_DEFAULTS, **RISK_DEFAULTS}
        return self.model_copy(update={k: v for k, v in defaults.items() if getattr(self, k) is None})
