"""The offline proposal report: what was learned from which evidence, and the gate's decision.

A report that loads is consistent: its validator recomputes the validation means from the
per-group results, the bootstrap interval from the per-group differences (same seed, same
samples), the decision from the gate, and the input checksum from the recorded inputs, and
refuses to load if any of them disagree (a tampered decision, metric or checksum).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal
from uuid import UUID

import numpy as np
from pydantic import Field, model_validator

from prme_core.canonical import canonical_digest
from prme_core.learning.bootstrap import BOOTSTRAP_ALGORITHM, bootstrap_interval, sign_flip_p_value
from prme_core.learning.config import POOL_DEFAULTS, SHRINKAGE_DEFAULTS, V3_DEFAULTS, LearningConfig
from prme_core.learning.fit import FIT_ALGORITHM
from prme_core.learning.gates import TOLERANCE, OfflineDecision, offline_decision, screen_decision
from prme_core.learning.pool_fit import POOL_NDCG_ALGORITHM, POOL_PAIRWISE_ALGORITHM, choose_factor
from prme_core.learning.power import groups_for_power
from prme_core.learning.split import SPLIT_ALGORITHM, crossfit_fold, is_validation
from prme_core.retrieval.multipliers import UNITY, ProfileFamily, RankingMultipliers
from prme_core.types import EvolvingModel, FrozenModel, Owner, Sha256Hex, SortedUnique

OFFLINE_LIMITATIONS = (
    "Scores only candidates the recorded retrievals returned and people judged; candidate generation, "
    "neural prefix membership, session lineage and packing are held fixed.",
    "A positive result does not establish better complete retrieval, context selection, answers or transfer "
    "to unseen tasks; the separate full-retrieval holdout is required before any profile.",
    "Relevance labels are judgments, not verified facts; unlabelled candidates are not negatives.",
)

Unit = float
FitAlgorithm = Literal["pairwise_weight_multipliers_v1", "pool_ndcg_search_v2", "pool_pairwise_logistic_v2"]
Metric = Literal["judged_ndcg", "pool_judged_ndcg"]
"""How validation NDCG@k is measured: ``judged_ndcg`` ranks only the judged candidates by
their replayed scores (version 1); ``pool_judged_ndcg`` re-ranks each request's whole recorded
pool and scores the returned list, judged positives gaining and everything else not."""


class QueryLearningResult(FrozenModel):
    """Per-group metrics (means over the group's requests) at unity and under the proposal."""

    group_id: Sha256Hex
    split: Literal["train", "validation"]
    request_ids: tuple[UUID, ...] = Field(min_length=1)
    query_digests: tuple[Sha256Hex, ...] = Field(min_length=1)
    baseline_pairwise_accuracy: float = Field(ge=0.0, le=1.0)
    candidate_pairwise_accuracy: float = Field(ge=0.0, le=1.0)
    baseline_ndcg: float = Field(ge=0.0, le=1.0)
    candidate_ndcg: float = Field(ge=0.0, le=1.0)


class CrossFitResult(FrozenModel):
    """A training group judged out of fold: metrics at unity and under the proposal fitted on the
    other folds' training groups (``fold`` names the proposal: ``crossfit_multipliers[fold]``)."""

    group_id: Sha256Hex
    fold: int = Field(ge=0)
    request_ids: tuple[UUID, ...] = Field(min_length=1)
    baseline_pairwise_accuracy: float = Field(ge=0.0, le=1.0)
    candidate_pairwise_accuracy: float = Field(ge=0.0, le=1.0)
    baseline_ndcg: float = Field(ge=0.0, le=1.0)
    candidate_ndcg: float = Field(ge=0.0, le=1.0)


class ProposalShrinkage(EvolvingModel):
    """How far a pool proposal was pulled toward the identity (``pool_fit.shrunk_search``): the
    factor chosen from ``config.shrinkage_grid``, each factor's mean held-out judged NDCG over
    inner folds of the fit's own training groups, and whether the identity was kept because
    the shrunk point did worse on the training objective; with ``config.shrinkage_risk_aversion``,
    each factor's held-out harm too (what the risk-averse choice subtracted)."""

    factor: float = Field(ge=0.0, le=1.0)
    inner_ndcg: tuple[float, ...] = ()
    kept_identity: bool = False
    inner_harm: tuple[float, ...] | None = None
    """Per grid factor, the inner folds' held-out harm (risk-averse choices only; absent otherwise,
    so a report written before the field keeps its bytes)."""

    ADDED_FIELDS: ClassVar[tuple[str, ...]] = ("inner_harm",)


class LearningCoverage(FrozenModel):
    feedback_records: int = Field(ge=0)
    requests_with_pairs: int = Field(ge=0)
    training_queries: int = Field(ge=0)
    validation_queries: int = Field(ge=0)
    explicit_pairs: int = Field(ge=0)


LEARNING_INPUTS = ("owner", "scopes", "surface", "snapshot_sha256", "query_groups")
"""The fields of a proposal (and of its prepared inputs) that ``learning_input_checksum`` covers."""


def learning_input_checksum(
    *, owner: str, scopes: tuple[str, ...], surface: str, snapshot_sha256: str, query_groups: dict[str, str]
) -> str:
    """What the proposal was computed from: the snapshot identity and the caller's groups."""
    return canonical_digest(
        {
            "owner": owner,
            "scopes": list(scopes),
            "surface": surface,
            "snapshot_sha256": snapshot_sha256,
            "query_groups": dict(sorted(query_groups.items())),
        }
    )


class AlternativeFit(FrozenModel):
    """The other pool objective, fitted on the same training requests and measured on the same
    validation groups — reported beside the proposal for comparison; it decides nothing."""

    algorithm: FitAlgorithm
    multipliers: RankingMultipliers
    validation_ndcg_gain: float
    validation_pairwise_gain: float
    validation_gain_interval: tuple[float, float]
    search_evaluations: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> AlternativeFit:
        low, high = self.validation_gain_interval
        if not low <= high:
            raise ValueError("an interval's lower end cannot exceed its upper end")
        return self


def power_alpha(schema_version: int, config: LearningConfig) -> float | None:
    """The one-sided level a report's power figure plans for: the gate's sign-flip bound
    (version 3), else the 95% interval's (None)."""
    return config.max_p_value if schema_version >= 3 else None


def evidence_differences(
    queries: tuple[QueryLearningResult, ...] | list[QueryLearningResult],
    crossfit: tuple[CrossFitResult, ...] | list[CrossFitResult] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(NDCG, pairwise-accuracy) differences of every group the version-3 gate judges: the
    proposal on the validation groups, then each cross-fitted training group out of fold."""
    rows = [q for q in queries if q.split == "validation"] + list(crossfit or ())
    ndcg = np.array([r.candidate_ndcg - r.baseline_ndcg for r in rows], dtype=np.float64)
    pairs = np.array([r.candidate_pairwise_accuracy - r.baseline_pairwise_accuracy for r in rows], dtype=np.float64)
    return ndcg, pairs


def evidence_summary(ndcg: np.ndarray, pairs: np.ndarray, config: LearningConfig) -> dict[str, Any]:
    """The version-3 gate's evidence figures over ``evidence_differences`` (as reports record them)."""
    return {
        "evidence_groups": int(ndcg.size),
        "evidence_ndcg_gain": float(ndcg.mean()),
        "evidence_pairwise_gain": float(pairs.mean()),
        "evidence_gain_interval": bootstrap_interval(ndcg, samples=config.bootstrap_samples, seed=config.seed),
        "evidence_sign_flip_p": sign_flip_p_value(ndcg, samples=config.bootstrap_samples, seed=config.seed),
    }


def offline_gate(
    *,
    schema_version: int,
    config: LearningConfig,
    ndcg_gain: float,
    interval_low: float,
    pairwise_gain: float,
    p_value: float | None,
    proposal_gain: float | None = None,
    proposal_interval: tuple[float, float] | None = None,
) -> OfflineDecision:
    """The decision a report of ``schema_version`` derives from its evidence: for version 3 the
    gains and p-value over the validation and cross-fitted groups (``evidence_differences``)
    and the proposal's own validation gain (its mean, or its interval's upper endpoint, as
    ``config.proposal_check`` says), for earlier versions over the validation groups."""
    if schema_version >= 3:
        by_interval = config.proposal_check == "interval"
        if by_interval and proposal_interval is None:
            raise ValueError("the interval proposal check needs the proposal's validation interval")
        return screen_decision(
            enough_groups=True,
            ndcg_gain=ndcg_gain,
            pairwise_gain=pairwise_gain,
            min_ndcg_gain=config.min_ndcg_gain,
            p_value=p_value,
            max_p_value=config.max_p_value,  # type: ignore[arg-type]
            proposal_gain=None if by_interval else proposal_gain,
            proposal_upper=proposal_interval[1] if by_interval else None,  # type: ignore[index]
        )
    return offline_decision(
        enough_groups=True,
        ndcg_gain=ndcg_gain,
        interval_low=interval_low,
        pairwise_gain=pairwise_gain,
        min_ndcg_gain=config.min_ndcg_gain,
        p_value=p_value,
        max_p_value=config.max_p_value if schema_version >= 2 else None,
    )


class LearningEvaluation(EvolvingModel):
    """The offline proposal report. Version 1: six multipliers fitted on judged candidates.
    Version 2 adds the profile family, how it was fitted (pool replay or judged candidates) and
    why, the validation metric, the fit's sample and search size, the observed per-group spread
    with the groups 80% power needs, and the alternative pool objective side by side. Version 3
    (what new evaluations write) records the same and decides by the screen
    (``gates.screen_decision``): its sign-flip test at ``config.max_p_value``, the bootstrap
    interval reported beside it; the holdout confirms."""

    ADDED_FIELDS: ClassVar[tuple[str, ...]] = (
        "family",
        "fit_path",
        "fit_reason",
        "metric",
        "fit_requests",
        "search_evaluations",
        "observed_sd",
        "groups_for_power",
        "alternative",
        "sign_flip_p",
        "crossfit",
        "crossfit_multipliers",
        "evidence_groups",
        "evidence_ndcg_gain",
        "evidence_pairwise_gain",
        "evidence_gain_interval",
        "evidence_sign_flip_p",
        "shrinkage",
        "crossfit_shrinkage",
    )

    schema_version: Literal[1, 2, 3] = 3
    algorithm: FitAlgorithm = FIT_ALGORITHM
    split_algorithm: Literal["sha256-seeded-group-hash-v1"] = SPLIT_ALGORITHM
    bootstrap_algorithm: Literal["numpy-pcg64-percentile-v1"] = BOOTSTRAP_ALGORITHM
    owner: Owner
    scopes: Annotated[tuple[str, ...], Field(min_length=1), SortedUnique]
    surface: Literal["results", "context"]
    config: LearningConfig
    snapshot_sha256: Sha256Hex
    input_checksum: Sha256Hex
    query_groups: dict[str, str] = Field(default_factory=dict)
    feedback_ids: tuple[UUID, ...]
    receipt_checksums: dict[str, Sha256Hex]
    multipliers: RankingMultipliers
    decision: OfflineDecision
    training_loss_before: float | None = None
    training_loss_after: float | None = None
    validation_ndcg_gain: float | None = None
    validation_pairwise_gain: float | None = None
    validation_gain_interval: tuple[float, float] | None = None
    coverage: LearningCoverage
    exclusions: dict[str, int] = Field(default_factory=dict)
    queries: tuple[QueryLearningResult, ...] = ()
    limitations: tuple[str, ...] = OFFLINE_LIMITATIONS
    family: ProfileFamily | None = None
    fit_path: Literal["pool", "judged"] | None = None
    fit_reason: str | None = None
    metric: Metric | None = None
    fit_requests: int | None = Field(default=None, ge=0)
    search_evaluations: int | None = Field(default=None, ge=0)
    observed_sd: float | None = Field(default=None, ge=0.0)
    groups_for_power: int | None = Field(default=None, ge=2)
    alternative: AlternativeFit | None = None
    sign_flip_p: float | None = Field(default=None, gt=0.0, le=1.0)
    crossfit: tuple[CrossFitResult, ...] | None = None
    """Version 3: the training groups judged out of fold (sorted by group id)."""
    crossfit_multipliers: tuple[RankingMultipliers, ...] | None = None
    """Version 3: the proposal each fold was judged by (fitted on the other folds' training groups)."""
    evidence_groups: int | None = Field(default=None, ge=0)
    evidence_ndcg_gain: float | None = None
    evidence_pairwise_gain: float | None = None
    evidence_gain_interval: tuple[float, float] | None = None
    evidence_sign_flip_p: float | None = Field(default=None, gt=0.0, le=1.0)
    """Version 3: the gate's evidence, the validation groups and the cross-fitted groups together
    (count, mean NDCG and pairwise-accuracy gains, bootstrap interval, one-sided sign-flip p)."""
    shrinkage: ProposalShrinkage | None = None
    """Pool fits with ``config.shrinkage_grid``: how the proposal was shrunk toward the identity."""
    crossfit_shrinkage: tuple[ProposalShrinkage, ...] | None = None
    """The same for each cross-fitting fold's proposal (its inner folds drawn from its own training groups)."""

    @model_validator(mode="after")
    def _rederive(self) -> LearningEvaluation:
        self._check_version()
        if len(set(self.feedback_ids)) != len(self.feedback_ids) or self.coverage.feedback_records != len(
            self.feedback_ids
        ):
            raise ValueError("feedback ids must be unique and match coverage.feedback_records")
        if any(v <= 0 for v in self.exclusions.values()):
            raise ValueError("exclusions list only reasons that occurred")
        expected = learning_input_checksum(**{name: getattr(self, name) for name in LEARNING_INPUTS})
        if expected != self.input_checksum:
            raise ValueError("input_checksum does not match the recorded inputs")
        enough = (
            self.coverage.training_queries >= self.config.min_training_queries
            and self.coverage.validation_queries >= self.config.min_validation_queries
        )
        if self.decision == "insufficient_data" or not enough:
            self._check_insufficient(enough)
            return self
        self._check_queries()
        if None in (self.training_loss_before, self.training_loss_after):
            raise ValueError("a fitted report records its training losses")
        before, after = self.training_loss_before, self.training_loss_after
        if not (math.isfinite(before) and math.isfinite(after) and 0.0 <= after <= before + TOLERANCE):  # type: ignore[arg-type]
            raise ValueError("training loss must be finite, non-negative and not increase")
        validation = [q for q in self.queries if q.split == "validation"]
        diffs = np.array([q.candidate_ndcg - q.baseline_ndcg for q in validation])
        pairwise = float(np.mean([q.candidate_pairwise_accuracy - q.baseline_pairwise_accuracy for q in validation]))
        gain = float(diffs.mean())
        if (
            abs(gain - (self.validation_ndcg_gain or 0.0)) > TOLERANCE
            or abs(pairwise - (self.validation_pairwise_gain or 0.0)) > TOLERANCE
        ):
            raise ValueError("validation gains do not match the per-group metrics")
        interval = bootstrap_interval(diffs, samples=self.config.bootstrap_samples, seed=self.config.seed)
        if self.validation_gain_interval is None or tuple(self.validation_gain_interval) != interval:
            raise ValueError("the bootstrap interval does not match the per-group differences")
        p_value = None
        if self.schema_version >= 2:
            p_value = sign_flip_p_value(diffs, samples=self.config.bootstrap_samples, seed=self.config.seed)
            if self.sign_flip_p != p_value:
                raise ValueError("sign_flip_p does not match the validation groups' differences")
        if self.schema_version >= 3:
            self._check_crossfit()
            self._check_shrinkage()
            evidence, evidence_pairs = evidence_differences(self.queries, self.crossfit)
            expected = evidence_summary(evidence, evidence_pairs, self.config)
            for name, value in expected.items():
                if getattr(self, name) != value:
                    raise ValueError(f"{name} does not match the validation and cross-fitted groups")
            self._check_power(evidence)
            decision = offline_gate(
                schema_version=3,
                config=self.config,
                ndcg_gain=expected["evidence_ndcg_gain"],
                interval_low=expected["evidence_gain_interval"][0],
                pairwise_gain=expected["evidence_pairwise_gain"],
                p_value=expected["evidence_sign_flip_p"],
                proposal_gain=gain,
                proposal_interval=interval,
            )
        else:
            self._check_power(diffs)
            decision = offline_gate(
                schema_version=self.schema_version,
                config=self.config,
                ndcg_gain=gain,
                interval_low=interval[0],
                pairwise_gain=pairwise,
                p_value=p_value,
            )
        if decision != self.decision:
            raise ValueError("learning decision does not match its validation evidence")
        return self

    def _check_version(self) -> None:
        v2 = (self.family, self.fit_path, self.fit_reason, self.metric)
        if self.schema_version == 1:
            if self.algorithm != FIT_ALGORITHM or any(getattr(self, f) is not None for f in self.ADDED_FIELDS):
                raise ValueError(
                    "a version-1 report fits six multipliers on judged candidates and records nothing more"
                )
            return
        if None in v2 or any(getattr(self.config, name) is None for name in POOL_DEFAULTS):
            raise ValueError("a version-2 report records its family, fit path and reason, metric and resolved config")
        v3 = self.schema_version >= 3
        if self.config.proposal_check is not None and not v3:
            raise ValueError("only a version-3 report records its proposal check")
        shrinkage_config = [getattr(self.config, name) is not None for name in SHRINKAGE_DEFAULTS]
        if len(set(shrinkage_config)) != 1 or (shrinkage_config[0] and not v3):
            raise ValueError("a report records both shrinkage fields or neither, and only from version 3")
        if any((getattr(self.config, name) is not None) != v3 for name in V3_DEFAULTS):
            raise ValueError("a version-3 report records its cross-fitting folds; a version-2 report none")
        fitted = self.decision != "insufficient_data"
        if self.schema_version == 2 and any(
            getattr(self, f) is not None for f in self.ADDED_FIELDS[self.ADDED_FIELDS.index("crossfit") :]
        ):
            raise ValueError("a version-2 report records no cross-fitted evidence")
        if v3 and fitted and None in (self.crossfit, self.crossfit_multipliers, self.evidence_groups):
            raise ValueError("a fitted version-3 report records its cross-fitted evidence")
        pool = self.fit_path == "pool"
        if pool != (self.algorithm in (POOL_NDCG_ALGORITHM, POOL_PAIRWISE_ALGORITHM)) or pool != (
            self.metric == "pool_judged_ndcg"
        ):
            raise ValueError("the algorithm and metric must be those of the report's fit path")
        if self.decision != "insufficient_data" and self.multipliers.family != self.family:
            raise ValueError(f"the proposal's multipliers are not of family {self.family}")

    def _check_power(self, diffs: np.ndarray) -> None:
        if self.schema_version == 1:
            return
        estimate = groups_for_power(diffs, alpha=power_alpha(self.schema_version, self.config))
        sd = estimate.sd if estimate.observed_groups >= 2 else None
        if (self.observed_sd is None) != (sd is None) or (sd is not None and abs(sd - self.observed_sd) > TOLERANCE):  # type: ignore[operator]
            raise ValueError("observed_sd does not match the validation groups' differences")
        if self.groups_for_power != estimate.groups_for_power:
            raise ValueError("groups_for_power does not match the validation groups' gain and spread")

    def _check_crossfit(self) -> None:
        """Cross-fitted groups are training groups, each in the fold its hash gives, judged by
        that fold's proposal; every fold has a proposal of the report's family."""
        folds = self.config.crossfit_folds
        assert folds is not None and self.crossfit is not None and self.crossfit_multipliers is not None
        if len(self.crossfit_multipliers) != folds or any(
            m.family != self.multipliers.family for m in self.crossfit_multipliers
        ):
            raise ValueError(f"a version-3 report records one proposal of its family per fold ({folds})")
        ids = [c.group_id for c in self.crossfit]
        if ids != sorted(set(ids)):
            raise ValueError("crossfit must be sorted by group id and unique")
        train = {q.group_id: q for q in self.queries if q.split == "train"}
        if set(ids) != set(train):
            raise ValueError("every training group is cross-fitted, and only those")
        for c in self.crossfit:
            if c.group_id not in train or c.fold != crossfit_fold(c.group_id, seed=self.config.seed, folds=folds):
                raise ValueError(f"cross-fitted group {c.group_id} is not a training group of fold {c.fold}")
            if c.request_ids != train[c.group_id].request_ids or (c.baseline_ndcg, c.baseline_pairwise_accuracy) != (
                train[c.group_id].baseline_ndcg,
                train[c.group_id].baseline_pairwise_accuracy,
            ):
                raise ValueError(f"cross-fitted group {c.group_id} disagrees with its training result at unity")

    def _check_shrinkage(self) -> None:
        """A pool proposal fitted with a shrinkage grid records one choice for itself and one per
        fold, each the factor its inner-fold evidence picks; other reports record none."""
        grid = self.config.shrinkage_grid
        if grid is None or self.fit_path != "pool":
            if self.shrinkage is not None or self.crossfit_shrinkage is not None:
                raise ValueError("only a pool fit with a shrinkage grid records shrinkage")
            return
        if self.shrinkage is None or self.crossfit_shrinkage is None:
            raise ValueError("a pool fit with a shrinkage grid records how it shrank the proposal and each fold's")
        if len(self.crossfit_shrinkage) != self.config.crossfit_folds:
            raise ValueError("a report records one shrinkage choice per cross-fitting fold")
        aversion = self.config.shrinkage_risk_aversion
        for choice in (self.shrinkage, *self.crossfit_shrinkage):
            if choice.inner_ndcg and len(choice.inner_ndcg) != len(grid):
                raise ValueError(f"inner-fold NDCG is recorded for each of the {len(grid)} shrinkage factors")
            harm = choice.inner_harm or ()
            if len(harm) != (len(choice.inner_ndcg) if aversion is not None else 0):
                raise ValueError(
                    "inner-fold harm is recorded for each shrinkage factor exactly when the choice is "
                    "risk-averse (config.shrinkage_risk_aversion) and the inner folds ran"
                )
            if choice.factor != choose_factor(grid, choice.inner_ndcg, harm, aversion or 0.0):
                raise ValueError(
                    f"shrinkage factor {choice.factor} is not the one its inner folds choose "
                    "(the best held-out NDCG less the risk aversion times the held-out harm, ties to the "
                    "smaller factor; no evidence: the smallest)"
                )

    def _check_insufficient(self, enough: bool) -> None:
        if self.decision != "insufficient_data" or enough:
            raise ValueError("insufficient_data is the decision exactly when coverage is below the minimum")
        if self.multipliers != UNITY or self.queries:
            raise ValueError("an insufficient-coverage report keeps unity multipliers and reports no fit")
        if any(
            v is not None
            for v in (
                self.training_loss_before,
                self.training_loss_after,
                self.validation_ndcg_gain,
                self.validation_pairwise_gain,
                self.validation_gain_interval,
                self.observed_sd,
                self.groups_for_power,
                self.alternative,
                self.sign_flip_p,
                self.crossfit,
                self.crossfit_multipliers,
                self.evidence_groups,
                self.evidence_ndcg_gain,
                self.evidence_pairwise_gain,
                self.evidence_gain_interval,
                self.evidence_sign_flip_p,
                self.shrinkage,
                self.crossfit_shrinkage,
            )
        ):
            raise ValueError("an insufficient-coverage report records no losses or metrics")

    def _check_queries(self) -> None:
        ids = [q.group_id for q in self.queries]
        if ids != sorted(set(ids)):
            raise ValueError("queries must be sorted by group id and unique")
        receipts = set(self.receipt_checksums)
        for q in self.queries:
            split = (
                "validation"
                if is_validation(q.group_id, seed=self.config.seed, validation_fraction=self.config.validation_fraction)
                else "train"
            )
            if q.split != split:
                raise ValueError(f"group {q.group_id} is recorded in the wrong split")
            if not {str(r) for r in q.request_ids} <= receipts:
                raise ValueError(f"group {q.group_id} names requests outside the recorded receipts")
        train = sum(q.split == "train" for q in self.queries)
        requests = sum(len(q.request_ids) for q in self.queries)
        c = self.coverage
        if self.fit_path == "pool":
            # A pool fit measures every validation group (up to ``max_group_requests`` of its
            # requests) and the training requests it re-ranked (all of them, or a sample of
            # ``max_fit_requests`` spread over the groups).
            train_requests = sum(len(q.request_ids) for q in self.queries if q.split == "train")
            if any(
                len(q.request_ids) > self.config.max_group_requests for q in self.queries if q.split == "validation"
            ) or (
                len(self.queries) - train != c.validation_queries
                or train > c.training_queries
                or train_requests != self.fit_requests
                or requests > c.requests_with_pairs
                or (self.fit_requests or 0) > self.config.max_fit_requests  # type: ignore[operator]
            ):
                raise ValueError("coverage counts do not match the per-group results")
        elif (train, len(self.queries) - train, requests) != (
            c.training_queries,
            c.validation_queries,
            c.requests_with_pairs,
        ):
            raise ValueError("coverage counts do not match the per-group results")

    def query_digests(self) -> frozenset[str]:
        """Digests of every normalized query used for training or validation (holdouts must avoid them)."""
        return frozenset(d for q in self.queries for d in q.query_digests)
