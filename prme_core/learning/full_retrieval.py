"""The full-retrieval holdout: paired fresh retrievals judged against complete relevant sets.

Each trial pairs a baseline and a candidate receipt of one request that differ only in the
declared ranking multipliers, and names every relevant node, also those neither arm returned.
Per receipt the recorded candidate order, truncated to k, gives recall@k, NDCG@k and MRR@k;
repeats are macro-averaged within a query group, then over groups. The decision is
``gates.holdout_decision`` over the mean NDCG gain, the lower endpoint of a paired query
bootstrap interval, the mean recall gain and a bound on regressions: from report version 2 the
harm (mean NDCG lost over all groups by the regressed ones) and the share of severely regressed
groups; version-1 reports bound the share of regressed groups. MRR is reported, not gated. Aggregates are always reported (a holdout has at least one group); only the interval
is ``None`` when there are fewer groups than ``min_query_groups`` (decision ``insufficient_data``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal
from uuid import UUID

import numpy as np
from pydantic import Field, field_validator, model_validator

from prme_core.canonical import assert_finite, canonical_digest
from prme_core.errors import HoldoutIntegrityError, InvalidInput
from prme_core.learning.bootstrap import BOOTSTRAP_ALGORITHM, bootstrap_interval, sign_flip_p_value, sign_flip_samples
from prme_core.learning.gates import (
    TOLERANCE,
    HoldoutDecision,
    confirm_decision,
    holdout_decision,
    regression_harm,
)
from prme_core.learning.holdout_config import (  # noqa: F401 (re-exported: reports and callers import them here)
    DEFAULT_ALPHA_BUDGET,
    HARM_DEFAULTS,
    FullRetrievalEvaluationConfig,
)
from prme_core.learning.holdout_pairs import check_multipliers, check_pair, index_receipts, verified_arm
from prme_core.learning.metrics import mrr_at_k, ndcg_at_k, recall_at_k
from prme_core.learning.power import groups_for_power
from prme_core.memory.models import ScopeSet
from prme_core.receipts.model import RetrievalReceipt
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.multipliers import UNITY, RankingMultipliers
from prme_core.retrieval.text import normalize_query
from prme_core.types import EvolvingModel, FrozenModel, Label, Normalized, Owner, Sha256Hex, Unique, Unit
from prme_core.validation import check_owner, check_scope_set, check_sha256, parse_model

ALGORITHM = "paired_full_retrieval_v1"
SURFACE = "results"
MAX_TRIALS = 10_000
MAX_RELEVANT = 10_000
METRICS = ("recall", "ndcg", "mrr")
LIMITATIONS: tuple[str, ...] = (
    "A positive holdout shows higher recall@k and NDCG@k of freshly executed retrievals against the "
    "supplied complete relevant sets, for this owner, scope set, memory artifact and feature identity only.",
    "It evaluates candidate generation and selection under the changed weights; it does not establish "
    "answer quality, unseen tasks, other owners or scope sets, or a later memory state.",
    "Relevant sets are caller judgments; incomplete or wrong judgments bias every metric.",
    "It does not authorize profile activation by itself: that also needs a positive offline proposal "
    "bound to the same proposal input checksum and candidate multipliers.",
    "Tuning against these results spends the holdout; register new holdout queries for the next final evaluation.",
    "MRR is reported for inspection and is not gated.",
)

RelevantNodeIds = Annotated[tuple[UUID, ...], Field(min_length=1, max_length=MAX_RELEVANT), Unique, Normalized]
"""The COMPLETE set of a query's relevant nodes: 1..MAX_RELEVANT ids without repeats, stored sorted."""
Gain = Annotated[float, Field(ge=-1.0, le=1.0)]


class FullRetrievalTrial(FrozenModel):
    """One paired execution of a holdout query and the COMPLETE set of its relevant nodes."""

    group_id: Label
    baseline_request_id: UUID
    candidate_request_id: UUID
    relevant_node_ids: RelevantNodeIds

    @model_validator(mode="after")
    def _two_retrievals(self) -> FullRetrievalTrial:
        if self.baseline_request_id == self.candidate_request_id:
            raise ValueError("baseline_request_id and candidate_request_id must name two different retrievals")
        return self


class FullRetrievalQueryResult(FrozenModel):
    """One query group: its paired request ids (in trial order) and group-mean metrics of both arms."""

    group_id: Label
    baseline_request_ids: tuple[UUID, ...] = Field(min_length=1)
    candidate_request_ids: tuple[UUID, ...] = Field(min_length=1)
    baseline_recall: Unit
    candidate_recall: Unit
    baseline_ndcg: Unit
    candidate_ndcg: Unit
    baseline_mrr: Unit
    candidate_mrr: Unit


class FullRetrievalCoverage(FrozenModel):
    """Trials, independent query groups and distinct relevant nodes the holdout judged."""

    trials: int = Field(ge=1)
    query_groups: int = Field(ge=1)
    relevant_nodes: int = Field(ge=1)


class FullRetrievalEvaluation(EvolvingModel):
    """The final-holdout report. It re-derives itself on load, so a tampered report fails to load.

    Version 2 gates on the harm of regressions and records it with the benefit, the severe
    share, the observed per-group spread and the groups 80% power needs. Version 3 (what new
    evaluations write) confirms: its sign-flip test decides at the level its look may spend
    (``config.look``, ``config.alpha_budget``), the bootstrap interval is reported beside it."""

    ADDED_FIELDS: ClassVar[tuple[str, ...]] = (
        "harm",
        "benefit",
        "severe_share",
        "observed_sd",
        "groups_for_power",
        "sign_flip_p",
    )

    schema_version: Literal[1, 2, 3, 4] = 4
    algorithm: Literal["paired_full_retrieval_v1"] = ALGORITHM
    bootstrap_algorithm: Literal["numpy-pcg64-percentile-v1"] = BOOTSTRAP_ALGORITHM
    owner: Owner
    scopes: ScopeSet
    surface: Literal["results"] = SURFACE
    config: FullRetrievalEvaluationConfig
    proposal_input_checksum: Sha256Hex
    memory_artifact_sha256: Sha256Hex
    input_checksum: Sha256Hex
    receipt_checksums: dict[UUID, Sha256Hex]
    feature_identity: dict[str, Any]
    feature_identity_sha256: Sha256Hex
    base_scoring: ScoringWeights
    baseline_multipliers: RankingMultipliers
    candidate_multipliers: RankingMultipliers
    decision: HoldoutDecision
    baseline_recall: Unit
    candidate_recall: Unit
    recall_gain: Gain
    baseline_ndcg: Unit
    candidate_ndcg: Unit
    ndcg_gain: Gain
    baseline_mrr: Unit
    candidate_mrr: Unit
    mrr_gain: Gain
    ndcg_gain_interval: tuple[Gain, Gain] | None
    regression_fraction: Unit
    coverage: FullRetrievalCoverage
    trials: tuple[FullRetrievalTrial, ...] = Field(min_length=1, max_length=MAX_TRIALS)
    queries: tuple[FullRetrievalQueryResult, ...] = Field(min_length=1)
    limitations: tuple[str, ...] = LIMITATIONS
    harm: Unit | None = None
    benefit: Unit | None = None
    severe_share: Unit | None = None
    observed_sd: float | None = Field(default=None, ge=0.0)
    groups_for_power: int | None = Field(default=None, ge=2)
    sign_flip_p: float | None = Field(default=None, gt=0.0, le=1.0)

    @field_validator("feature_identity")
    @classmethod
    def _finite(cls, value: dict[str, Any]) -> dict[str, Any]:
        assert_finite(value, "feature_identity")
        return value

    @model_validator(mode="after")
    def _rederive(self) -> FullRetrievalEvaluation:
        if self.limitations != LIMITATIONS:
            raise ValueError("limitations must be the fixed statements of this algorithm")
        keys = [_trial_key(t) for t in self.trials]
        if keys != sorted(keys):
            raise ValueError("trials must be sorted by (group_id, baseline_request_id)")
        ids = _request_ids(self.trials)
        if len(set(ids)) != len(ids):
            raise ValueError("a retrieval receipt cannot enter more than one full retrieval trial")
        if set(self.receipt_checksums) != set(ids):
            raise ValueError("receipt_checksums must hold exactly both arms of every trial")
        groups = _group_requests(self.trials)
        if [q.group_id for q in self.queries] != list(groups):
            raise ValueError("queries must hold one result per trial group, sorted by group_id")
        for q in self.queries:
            if (q.baseline_request_ids, q.candidate_request_ids) != groups[q.group_id]:
                raise ValueError(f"query group {q.group_id!r}: request ids disagree with its trials")
        if self.coverage != _coverage(self.trials):
            raise ValueError("coverage counts disagree with the trials")
        cfg = self.config
        harm_config = cfg.max_mean_harm is not None
        if (self.schema_version >= 2) != harm_config or (
            harm_config and None in (cfg.severe_loss, cfg.max_severe_share, cfg.max_p_value)
        ):
            raise ValueError("a version-2 or -3 report records its resolved regression bounds; a version-1 report none")
        if (self.schema_version >= 3) != cfg.sequential or (cfg.sequential) != (cfg.alpha_budget is not None):
            raise ValueError("a version-3 or -4 report records its look and alpha budget; earlier versions neither")
        if (self.schema_version == 4) != cfg.per_proposal or cfg.per_proposal != (
            cfg.offline_alpha is not None and cfg.level_cap is not None
        ):
            raise ValueError("a version-4 report records its offline look, offline alpha and level cap; others none")
        if cfg.sequential and abs(cfg.max_p_value - cfg.level()) > TOLERANCE:  # type: ignore[operator]
            raise ValueError("max_p_value must be the level the report's look may spend (look_alpha, holdout_level)")
        _check_summary(self, _summary(self.queries, self.config))
        if self.feature_identity_sha256 != canonical_digest(self.feature_identity):
            raise ValueError("feature_identity_sha256 is not the digest of feature_identity")
        if self.input_checksum != _input_checksum(self):
            raise ValueError("input_checksum does not match the report's inputs")
        return self


def evaluate_full_retrieval(
    receipts: Mapping[UUID, tuple[RetrievalReceipt, str]],
    trials: Sequence[FullRetrievalTrial | Mapping[str, Any]],
    *,
    owner: str,
    scopes: Sequence[str],
    proposal_input_checksum: str,
    memory_artifact_sha256: str,
    candidate_multipliers: RankingMultipliers | Mapping[str, float],
    baseline_multipliers: RankingMultipliers | Mapping[str, float] | None = None,
    config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
    look: int | None = None,
    offline_look: int | None = None,
    offline_alpha: float | None = None,
) -> FullRetrievalEvaluation:
    """Verify paired receipts and judge them against complete relevant sets (pure; fails closed).

    ``receipts`` maps request id → (receipt, checksum), e.g. from ``receipts.store.get_receipts``.
    ``look`` is this evaluation's number among the partition's holdout looks
    (``learning.looks.record_look``; default the configuration's, else 1): it sets the level the
    confirming test may spend. ``offline_look`` and ``offline_alpha`` (``learning.looks.
    proposal_look``: the proposal's number among the partition's recorded proposals and its
    offline gate's level) make it a version-4 report, whose level is spent over proposals
    (``gates.holdout_level``) and whose ``look`` counts the looks at that one proposal. A profile
    needs the store's record of both.
    """
    owner, scope_set, cfg, candidate, baseline = check_evaluation_arguments(
        owner=owner,
        scopes=scopes,
        proposal_input_checksum=proposal_input_checksum,
        memory_artifact_sha256=memory_artifact_sha256,
        candidate_multipliers=candidate_multipliers,
        baseline_multipliers=baseline_multipliers,
        config=config,
        look=look,
        offline_look=offline_look,
        offline_alpha=offline_alpha,
    )
    parsed = sorted(parse_trials(trials), key=_trial_key)
    supplied = index_receipts(receipts)

    used: set[UUID] = set()
    checksums: dict[UUID, str] = {}
    group_of_query: dict[str, str] = {}
    shared: tuple[ScoringWeights, dict[str, Any]] | None = None
    arms: list[tuple[RetrievalReceipt, RetrievalReceipt]] = []
    for trial in parsed:
        where = f"trial (group {trial.group_id!r}, baseline {trial.baseline_request_id})"
        pair = []
        for arm, request_id, expected in (
            ("baseline", trial.baseline_request_id, baseline),
            ("candidate", trial.candidate_request_id, candidate),
        ):
            if request_id in used:
                raise HoldoutIntegrityError(
                    f"{where}: receipt {request_id} already entered another trial; a "
                    "retrieval receipt cannot enter more than one full retrieval trial"
                )
            used.add(request_id)
            receipt, checksum = verified_arm(supplied, request_id, arm, where, owner, scope_set)
            check_multipliers(receipt, expected, arm, where)
            checksums[request_id] = checksum
            pair.append(receipt)
        base, cand = pair
        check_pair(base, cand, where)
        normalized = normalize_query(base.query)
        if group_of_query.setdefault(normalized, trial.group_id) != trial.group_id:
            raise HoldoutIntegrityError(
                f"{where}: the normalized query already belongs to group {group_of_query[normalized]!r}; repeated "
                "normalized queries cannot use different groups (give repeats and paraphrases one group)"
            )
        identity = (base.scoring, base.execution.features)  # type: ignore[union-attr]
        if shared is None:
            shared = identity
        elif identity[0] != shared[0]:
            raise HoldoutIntegrityError(
                f"{where}: base scoring differs from the other trials'; every pair in one "
                "holdout must share one base scoring configuration"
            )
        elif identity[1] != shared[1]:
            raise HoldoutIntegrityError(
                f"{where}: execution.features differ from the other trials'; every pair "
                "in one holdout must share one feature identity"
            )
        arms.append((base, cand))
    assert shared is not None
    queries = _group_results(parsed, arms, cfg.k)
    fields: dict[str, Any] = dict(
        schema_version=4 if cfg.per_proposal else 3,
        owner=owner,
        scopes=scope_set,
        config=cfg,
        proposal_input_checksum=proposal_input_checksum,
        memory_artifact_sha256=memory_artifact_sha256,
        receipt_checksums=dict(sorted(checksums.items())),
        feature_identity=shared[1],
        feature_identity_sha256=canonical_digest(shared[1]),
        base_scoring=shared[0],
        baseline_multipliers=baseline,
        candidate_multipliers=candidate,
        coverage=_coverage(parsed),
        trials=tuple(parsed),
        queries=queries,
        **_summary(queries, cfg),
    )
    fields["input_checksum"] = _input_checksum(FullRetrievalEvaluation.model_construct(**fields))
    return FullRetrievalEvaluation(**fields)


def check_evaluation_arguments(
    *,
    owner: Any,
    scopes: Any,
    proposal_input_checksum: Any,
    memory_artifact_sha256: Any,
    candidate_multipliers: Any,
    baseline_multipliers: Any = None,
    config: Any = None,
    look: int | None = None,
    offline_look: int | None = None,
    offline_alpha: float | None = None,
) -> tuple[str, tuple[str, ...], FullRetrievalEvaluationConfig, RankingMultipliers, RankingMultipliers]:
    """Every argument of ``evaluate_full_retrieval`` but the receipts and trials, validated
    (``InvalidInput`` names the field): callers check them before reading any receipt."""
    owner = check_owner(owner)
    scope_set = check_scope_set(scopes)
    check_sha256(proposal_input_checksum, "proposal_input_checksum")
    check_sha256(memory_artifact_sha256, "memory_artifact_sha256")
    cfg = parse_model(FullRetrievalEvaluationConfig, config if config is not None else {}, "config").resolved(
        look=look, offline_look=offline_look, offline_alpha=offline_alpha
    )
    candidate = parse_model(RankingMultipliers, candidate_multipliers, "candidate_multipliers")
    baseline = (
        UNITY
        if baseline_multipliers is None
        else parse_model(RankingMultipliers, baseline_multipliers, "baseline_multipliers")
    )
    return owner, scope_set, cfg, candidate, baseline


def parse_trials(trials: Any) -> list[FullRetrievalTrial]:
    """1..MAX_TRIALS trials (models or mappings), validated in the given order."""
    if isinstance(trials, (str, bytes, Mapping)) or not isinstance(trials, Sequence):
        raise InvalidInput("trials", "must be a list of FullRetrievalTrial")
    if not 1 <= len(trials) <= MAX_TRIALS:
        raise InvalidInput("trials", f"holds {len(trials)} trials; a holdout needs 1..{MAX_TRIALS}")
    return [parse_model(FullRetrievalTrial, t, f"trials[{i}]") for i, t in enumerate(trials)]


# --- metrics and summary ------------------------------------------------------------------------


def _arm_metrics(receipt: RetrievalReceipt, relevant: frozenset[UUID], k: int) -> tuple[float, float, float]:
    flags = np.fromiter((c.node_id in relevant for c in receipt.candidates[:k]), dtype=bool)
    n = len(relevant)
    return recall_at_k(flags, n, k), ndcg_at_k(flags, n, k), mrr_at_k(flags, k)


def _group_results(
    trials: Sequence[FullRetrievalTrial], arms: Sequence[tuple[RetrievalReceipt, RetrievalReceipt]], k: int
) -> tuple[FullRetrievalQueryResult, ...]:
    """Per group: the mean of each arm's metrics over the group's trials (repeats, paraphrases)."""
    rows: dict[str, list[tuple[float, ...]]] = {}
    for trial, (base, cand) in zip(trials, arms, strict=True):
        relevant = frozenset(trial.relevant_node_ids)
        rows.setdefault(trial.group_id, []).append(_arm_metrics(base, relevant, k) + _arm_metrics(cand, relevant, k))
    requests = _group_requests(trials)
    out = []
    for group, values in rows.items():
        m = np.mean(np.asarray(values, dtype=np.float64), axis=0)
        out.append(
            FullRetrievalQueryResult(
                group_id=group,
                baseline_request_ids=requests[group][0],
                candidate_request_ids=requests[group][1],
                baseline_recall=float(m[0]),
                baseline_ndcg=float(m[1]),
                baseline_mrr=float(m[2]),
                candidate_recall=float(m[3]),
                candidate_ndcg=float(m[4]),
                candidate_mrr=float(m[5]),
            )
        )
    return tuple(out)


def _summary(queries: Sequence[FullRetrievalQueryResult], cfg: FullRetrievalEvaluationConfig) -> dict[str, Any]:
    """Macro-averaged metrics, paired gains, regression share, interval and decision."""
    arms = [
        {m: np.array([getattr(q, f"{arm}_{m}") for q in queries], dtype=np.float64) for m in METRICS}
        for arm in ("baseline", "candidate")
    ]
    return summarize_groups(arms[0], arms[1], cfg)


def summarize_groups(
    baseline: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray], cfg: FullRetrievalEvaluationConfig
) -> dict[str, Any]:
    """The report's summary and decision from per-group metrics of both arms (``METRICS`` →
    one value per query group, in group order): what a holdout report derives and checks."""
    out: dict[str, Any] = {}
    differences: dict[str, np.ndarray] = {}
    for m in METRICS:
        base = np.asarray(baseline[m], dtype=np.float64)
        cand = np.asarray(candidate[m], dtype=np.float64)
        differences[m] = cand - base
        out[f"baseline_{m}"], out[f"candidate_{m}"] = float(base.mean()), float(cand.mean())
        out[f"{m}_gain"] = float(differences[m].mean())
    diffs = differences["ndcg"]
    groups = len(diffs)
    out["regression_fraction"] = float(np.count_nonzero(diffs < -TOLERANCE)) / groups
    enough = groups >= cfg.min_query_groups
    interval = bootstrap_interval(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed) if enough else None
    out["ndcg_gain_interval"] = interval
    bounds: dict[str, Any] = {
        "regression_fraction": out["regression_fraction"],
        "max_regression_fraction": cfg.max_regression_fraction,
    }
    if cfg.max_mean_harm is not None:  # versions 2 and 3
        harm, benefit, severe = regression_harm(diffs, cfg.severe_loss)  # type: ignore[arg-type]
        estimate = groups_for_power(diffs, alpha=cfg.max_p_value if cfg.sequential else None)
        samples = sign_flip_samples(cfg.max_p_value, cfg.bootstrap_samples) if cfg.sequential else cfg.bootstrap_samples  # type: ignore[arg-type]
        p_value = sign_flip_p_value(diffs, samples=samples, seed=cfg.seed)
        out.update(
            harm=harm,
            benefit=benefit,
            severe_share=severe,
            observed_sd=estimate.sd if estimate.observed_groups >= 2 else None,
            groups_for_power=estimate.groups_for_power,
            sign_flip_p=p_value,
        )
        bounds = {
            "harm": harm,
            "max_mean_harm": cfg.max_mean_harm,
            "severe_share": severe,
            "max_severe_share": cfg.max_severe_share,
            "p_value": p_value,
            "max_p_value": cfg.max_p_value,
        }
    if cfg.sequential:
        out["decision"] = confirm_decision(
            enough_groups=enough,
            ndcg_gain=out["ndcg_gain"],
            recall_gain=out["recall_gain"],
            min_ndcg_gain=cfg.min_ndcg_gain,
            harm=out["harm"],
            max_mean_harm=cfg.max_mean_harm,  # type: ignore[arg-type]
            severe_share=out["severe_share"],
            max_severe_share=cfg.max_severe_share,  # type: ignore[arg-type]
            p_value=out["sign_flip_p"],
            alpha=cfg.max_p_value,  # type: ignore[arg-type]
        )
        return out
    out["decision"] = holdout_decision(
        enough_groups=enough,
        ndcg_gain=out["ndcg_gain"],
        interval_low=None if interval is None else interval[0],
        recall_gain=out["recall_gain"],
        min_ndcg_gain=cfg.min_ndcg_gain,
        **bounds,
    )
    return out


def _check_summary(report: FullRetrievalEvaluation, expected: dict[str, Any]) -> None:
    for name, value in expected.items():
        recorded = getattr(report, name)
        if name == "decision":
            if recorded != value:
                raise ValueError(f"decision {recorded!r} does not match its evidence, which gives {value!r}")
        elif name == "ndcg_gain_interval":
            if (recorded is None) != (value is None) or (
                value is not None and not all(abs(a - b) <= TOLERANCE for a, b in zip(recorded, value))
            ):
                raise ValueError(
                    f"ndcg_gain_interval {recorded} does not match the bootstrap of the group "
                    f"differences, which gives {value}"
                )
        elif (recorded is None) != (value is None) or (value is not None and abs(recorded - value) > TOLERANCE):
            raise ValueError(f"{name} {recorded!r} does not match the per-group results, which give {value!r}")


# --- identities -------------------------------------------------------------------------------------


def _trial_key(trial: FullRetrievalTrial) -> tuple[str, str]:
    return trial.group_id, str(trial.baseline_request_id)


def _request_ids(trials: Sequence[FullRetrievalTrial]) -> list[UUID]:
    return [r for t in trials for r in (t.baseline_request_id, t.candidate_request_id)]


def _group_requests(trials: Sequence[FullRetrievalTrial]) -> dict[str, tuple[tuple[UUID, ...], tuple[UUID, ...]]]:
    """group id → (baseline ids, candidate ids) in trial order; groups in sorted order."""
    groups: dict[str, tuple[list[UUID], list[UUID]]] = {}
    for t in sorted(trials, key=_trial_key):
        base, cand = groups.setdefault(t.group_id, ([], []))
        base.append(t.baseline_request_id)
        cand.append(t.candidate_request_id)
    return {g: (tuple(b), tuple(c)) for g, (b, c) in groups.items()}


def _coverage(trials: Sequence[FullRetrievalTrial]) -> FullRetrievalCoverage:
    return FullRetrievalCoverage(
        trials=len(trials),
        query_groups=len({t.group_id for t in trials}),
        relevant_nodes=len({n for t in trials for n in t.relevant_node_ids}),
    )


def _input_checksum(report: FullRetrievalEvaluation) -> str:
    """SHA-256 of the canonical JSON of everything the evaluation was computed from."""
    return canonical_digest(
        {
            "owner": report.owner,
            "scopes": list(report.scopes),
            "proposal_input_checksum": report.proposal_input_checksum,
            "memory_artifact_sha256": report.memory_artifact_sha256,
            "baseline_multipliers": report.baseline_multipliers.model_dump(mode="json"),
            "candidate_multipliers": report.candidate_multipliers.model_dump(mode="json"),
            "base_scoring": report.base_scoring.model_dump(mode="json"),
            "config": report.config.model_dump(mode="json"),
            "trials": [t.model_dump(mode="json") for t in report.trials],
            "receipt_checksums": {str(k): v for k, v in report.receipt_checksums.items()},
        }
    )
