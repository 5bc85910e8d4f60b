"""Gate verdicts: the pure decisions an orchestrator's checks enforce (and nothing else).

Each function takes the persisted output of a stage (plus, where needed, the live pointer or
the running pipeline's identity) and returns whether the gate passed, a one-line reason and the
facts a person checks first. ``prme_assets.checks`` only maps these to asset-check results.
The verdicts on a candidate profile are in ``profiles.verdicts`` (profiles sit above learning).

A failing verdict is one of two kinds. An *expected "no"* (``expected=True``) is sound evidence
saying "not enough evidence" or "no improvement" (coverage short, offline or holdout decision
``insufficient_data``/``no_improvement``, no registered holdout queries); its facts say what is
needed (``needs``, ``more_groups_needed``, from ``learning.power``). Every other "no" is an
*integrity failure* (receipts that do not replay, memory changed during the holdout, holdout
queries overlapping training, evidence not bound, runtime incompatible): someone must look at
it. Failing is the default, so a new reason is an integrity failure until classified. Neither
kind lets a profile through; the kind only decides how an orchestrator reports the "no".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from prme_core.learning.bootstrap import CONFIDENCE
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import FullRetrievalEvaluation
from prme_core.learning.gates import look_alpha
from prme_core.learning.power import GroupsNeeded, groups_for_power
from prme_core.learning.proposal import LearningEvaluation, evidence_differences, power_alpha
from prme_core.learning.stages import HoldoutOutcome, SplitSummary

VerdictOutcome = Literal["passed", "expected_no", "integrity_failure"]


@dataclass(frozen=True)
class Verdict:
    passed: bool
    description: str
    facts: dict[str, Any] = field(default_factory=dict)
    expected: bool = False
    """For a failing verdict: the "no" is an expected outcome of sound evidence, not an
    integrity failure."""

    @property
    def outcome(self) -> VerdictOutcome:
        if self.passed:
            return "passed"
        return "expected_no" if self.expected else "integrity_failure"


def offline_groups_needed(report: LearningEvaluation) -> tuple[GroupsNeeded, int | None]:
    """(estimate over the gate's groups, more judged query groups to collect in total).

    Version 3: the gate judges the validation and the cross-fitted training groups, nearly every
    judged group, so the groups to collect are those 80% power needs at the gate's level less
    those judged. Earlier versions judged only the validation groups, ``validation_fraction`` of
    new judged groups (the split is a hash): the groups needed divided by that fraction."""
    if report.schema_version >= 3:
        evidence, _ = evidence_differences(report.queries, report.crossfit)
        estimate = groups_for_power(evidence, alpha=power_alpha(report.schema_version, report.config))
        if estimate.groups_for_power is None:
            return estimate, None
        return estimate, max(0, estimate.groups_for_power - estimate.observed_groups)
    validation = [q.candidate_ndcg - q.baseline_ndcg for q in report.queries if q.split == "validation"]
    estimate = groups_for_power(validation)
    if estimate.groups_for_power is None:
        return estimate, None
    total_needed = math.ceil(estimate.groups_for_power / report.config.validation_fraction)
    return estimate, max(0, total_needed - len(report.queries))


def holdout_groups_needed(evaluation: FullRetrievalEvaluation) -> GroupsNeeded:
    """The estimate over the holdout's query groups (more registered holdout queries to add),
    planned for the level the *next* look may spend (version 3), else the 95% interval."""
    cfg = evaluation.config
    if cfg.per_proposal:  # the next night's proposal, on its first look
        alpha = cfg.model_copy(update={"offline_look": cfg.offline_look + 1, "look": 1}).level()  # type: ignore[operator]
    else:
        alpha = look_alpha(cfg.alpha_budget, cfg.look + 1) if cfg.sequential else None  # type: ignore[arg-type,operator]
    return groups_for_power([q.candidate_ndcg - q.baseline_ndcg for q in evaluation.queries], alpha=alpha)


def _coverage_needs(training: int, validation: int, config: LearningConfig) -> dict[str, Any]:
    """New judged query groups to collect until both splits reach their minimum (the hash puts
    ``validation_fraction`` of new groups in validation)."""
    short_t = max(0, config.min_training_queries - training)
    short_v = max(0, config.min_validation_queries - validation)
    more = max(math.ceil(short_t / (1.0 - config.validation_fraction)), math.ceil(short_v / config.validation_fraction))
    return {
        "more_groups_needed": more,
        "needs": f"needs about {more} more judged queries to reach {config.min_training_queries} training and "
        f"{config.min_validation_queries} validation groups",
    }


def _power_needs(estimate: GroupsNeeded, more: int | None, noun: str) -> dict[str, Any]:
    """What a "no" with per-group differences needs: more groups for 80% power at the observed
    gain, or "no measurable gain" when the gain is ≤ 0."""
    if more is None:
        needs = "no measurable gain"
    elif more == 0:
        needs = f"enough {noun} for 80% power at the observed gain"
    else:
        needs = f"needs about {more} more {noun}"
    return {
        "observed_sd": estimate.sd if estimate.observed_groups >= 2 else None,
        "groups_for_power": estimate.groups_for_power,
        "more_groups_needed": more,
        "needs": needs,
    }


def fit_facts(proposal: LearningEvaluation) -> dict[str, Any]:
    """How a proposal was fitted and what it can be compared with (version-2 reports)."""
    alt = proposal.alternative
    return {
        "family": proposal.family or "multipliers_v1",
        "algorithm": proposal.algorithm,
        "fit_path": proposal.fit_path or "judged",
        "fit_reason": proposal.fit_reason,
        "metric": proposal.metric or "judged_ndcg",
        "fit_requests": proposal.fit_requests,
        "alternative": None if alt is None else alt.algorithm,
        "alternative_validation_ndcg_gain": None if alt is None else alt.validation_ndcg_gain,
        "alternative_interval_low": None if alt is None else alt.validation_gain_interval[0],
        **shrinkage_facts(proposal),
    }


def shrinkage_facts(proposal: LearningEvaluation) -> dict[str, Any]:
    """How far the proposal and its folds' were shrunk toward the identity, and the grid and
    inner-fold evidence that chose it (None where the report fitted without shrinkage)."""
    cfg, chosen = proposal.config, proposal.shrinkage
    return {
        "shrinkage_grid": None if cfg.shrinkage_grid is None else list(cfg.shrinkage_grid),
        "shrinkage_folds": cfg.shrinkage_folds,
        "shrinkage_factor": None if chosen is None else chosen.factor,
        "shrinkage_inner_ndcg": None if chosen is None else [round(v, 6) for v in chosen.inner_ndcg],
        "shrinkage_kept_identity": None if chosen is None else chosen.kept_identity,
        "shrinkage_risk_aversion": cfg.shrinkage_risk_aversion,
        "shrinkage_inner_harm": None
        if chosen is None or not chosen.inner_harm
        else [round(v, 6) for v in chosen.inner_harm],
        "crossfit_shrinkage_factors": None
        if proposal.crossfit_shrinkage is None
        else [c.factor for c in proposal.crossfit_shrinkage],
    }


def regression_bounds(evaluation: FullRetrievalEvaluation) -> dict[str, Any]:
    """The holdout's regression measures with the thresholds that bounded them."""
    e, cfg = evaluation, evaluation.config
    if e.schema_version == 1:
        return {"regression_fraction": e.regression_fraction, "max_regression_fraction": cfg.max_regression_fraction}
    sequential = (
        {"look": cfg.look, "alpha_budget": cfg.alpha_budget, "look_alpha": cfg.max_p_value} if cfg.sequential else {}
    )
    if cfg.per_proposal:
        sequential.update(offline_look=cfg.offline_look, offline_alpha=cfg.offline_alpha, level_cap=cfg.level_cap)
    return {
        **sequential,
        "harm": e.harm,
        "max_mean_harm": cfg.max_mean_harm,
        "benefit": e.benefit,
        "severe_share": e.severe_share,
        "severe_loss": cfg.severe_loss,
        "max_severe_share": cfg.max_severe_share,
        "sign_flip_p": e.sign_flip_p,
        "max_p_value": cfg.max_p_value,
        "regression_fraction": e.regression_fraction,
    }


def coverage_verdict(split: SplitSummary) -> Verdict:
    c = split.coverage
    facts = {
        "training_groups": c.training_queries,
        "validation_groups": c.validation_queries,
        "min_training_groups": split.min_training_queries,
        "min_validation_groups": split.min_validation_queries,
        "requests_with_pairs": c.requests_with_pairs,
        "explicit_pairs": c.explicit_pairs,
        "feedback_records": c.feedback_records,
        **{f"excluded_{k}": v for k, v in split.exclusions.items()},
    }
    if split.coverage_sufficient:
        return Verdict(True, f"{c.training_queries} training and {c.validation_queries} validation groups", facts)
    return Verdict(
        False,
        f"insufficient coverage: {c.training_queries}/{split.min_training_queries} training and "
        f"{c.validation_queries}/{split.min_validation_queries} validation groups; collect more "
        "judged queries for this scope set",
        {
            **facts,
            "decision": "insufficient_data",
            **_coverage_needs(c.training_queries, c.validation_queries, split.config),
        },
        expected=True,
    )


def replay_verdict(split: SplitSummary) -> Verdict:
    pool = split.fit_path == "pool"
    unit = "recorded returned lists" if pool else "judged candidates"
    facts = {
        "fit_path": split.fit_path or "judged",
        "replayed": split.replay_candidates,
        "replayed_unit": unit,
        "mismatches": split.replay_mismatches,
        "largest_difference": split.replay_worst_difference,
    }
    if split.replay_exact:
        how = "re-ranking the recorded pools reproduces all" if pool else "replay at unity reproduces all"
        return Verdict(True, f"{how} {split.replay_candidates} {unit} exactly", facts)
    return Verdict(
        False,
        f"{split.replay_mismatches} {unit} do not replay to what was recorded; the receipts cannot support learning",
        facts,
    )


def proposal_check(proposal: LearningEvaluation) -> str | None:
    """What the report's offline gate asked of the proposal's own validation gain (version 3:
    ``interval`` or ``mean``, the rule of reports written before the field; earlier: None)."""
    if proposal.schema_version < 3:
        return None
    return proposal.config.proposal_check or "mean"


def offline_gate_verdict(proposal: LearningEvaluation) -> Verdict:
    interval = proposal.validation_gain_interval
    facts = {
        "decision": proposal.decision,
        "gate": "validation and cross-fitted groups" if proposal.schema_version >= 3 else "validation groups",
        "evidence_groups": proposal.evidence_groups,
        "evidence_ndcg_gain": proposal.evidence_ndcg_gain,
        "evidence_interval_low": None
        if proposal.evidence_gain_interval is None
        else proposal.evidence_gain_interval[0],
        "evidence_interval_high": None
        if proposal.evidence_gain_interval is None
        else proposal.evidence_gain_interval[1],
        "evidence_pairwise_gain": proposal.evidence_pairwise_gain,
        "evidence_sign_flip_p": proposal.evidence_sign_flip_p,
        "crossfit_folds": proposal.config.crossfit_folds,
        "proposal_check": proposal_check(proposal),
        "validation_groups": proposal.coverage.validation_queries,
        "validation_ndcg_gain": proposal.validation_ndcg_gain,
        "interval_low": None if interval is None else interval[0],
        "interval_high": None if interval is None else interval[1],
        "validation_pairwise_gain": proposal.validation_pairwise_gain,
        "min_ndcg_gain": proposal.config.min_ndcg_gain,
        "sign_flip_p": proposal.sign_flip_p,
        "max_p_value": proposal.config.max_p_value,
        "input_checksum": proposal.input_checksum,
        **fit_facts(proposal),
        **{f"multiplier_{k}": v for k, v in proposal.multipliers.model_dump().items()},
    }
    if proposal.decision == "improved_on_observed_candidates":
        if proposal.schema_version >= 3:
            low, high = proposal.evidence_gain_interval  # type: ignore[misc]
            return Verdict(
                True,
                f"NDCG gain {proposal.evidence_ndcg_gain:+.4f} [{low:+.4f}, {high:+.4f}] over "
                f"{proposal.evidence_groups} validation and cross-fitted groups (sign-flip p "
                f"{proposal.evidence_sign_flip_p:.3g} ≤ {proposal.config.max_p_value}); the proposal itself "
                f"{proposal.validation_ndcg_gain:+.4f} [{interval[0]:+.4f}, {interval[1]:+.4f}] on the validation "  # type: ignore[index]
                f"groups (check: {proposal_check(proposal)})",
                facts,
            )
        return Verdict(
            True,
            f"validation NDCG gain {proposal.validation_ndcg_gain:+.4f}, {CONFIDENCE:.0%} interval "
            f"[{interval[0]:+.4f}, {interval[1]:+.4f}]",  # type: ignore[index]
            facts,
        )
    if proposal.decision == "insufficient_data":
        needs = _coverage_needs(
            proposal.coverage.training_queries, proposal.coverage.validation_queries, proposal.config
        )
    else:
        needs = _power_needs(*offline_groups_needed(proposal), "judged queries")
    return Verdict(False, f"offline gate: {proposal.decision}", {**facts, **needs}, expected=True)


def holdout_memory_verdict(outcome: HoldoutOutcome) -> Verdict:
    facts = {"status": outcome.status, "memory_before": outcome.memory_before, "memory_after": outcome.memory_after}
    if outcome.status == "memory_changed":
        return Verdict(False, "memory changed while the holdout ran; pause writes for this owner and rerun", facts)
    if outcome.status != "evaluated":
        return Verdict(
            False,
            f"no holdout evaluation ({outcome.status}): {outcome.message}",
            facts,
            expected=outcome.status == "no_holdout_queries",
        )
    return Verdict(
        outcome.memory_before == outcome.memory_after, "memory unchanged across all paired retrievals", facts
    )


def holdout_gate_verdict(outcome: HoldoutOutcome) -> Verdict:
    e = outcome.evaluation
    if e is None:
        return Verdict(
            False,
            f"no holdout evaluation ({outcome.status}): {outcome.message}",
            {"status": outcome.status},
            expected=outcome.status == "no_holdout_queries",
        )
    interval = e.ndcg_gain_interval
    facts = {
        "decision": e.decision,
        "ndcg_gain": e.ndcg_gain,
        "recall_gain": e.recall_gain,
        "mrr_gain": e.mrr_gain,
        "interval_low": None if interval is None else interval[0],
        "interval_high": None if interval is None else interval[1],
        **regression_bounds(e),
        "query_groups": e.coverage.query_groups,
        "min_query_groups": e.config.min_query_groups,
        "min_ndcg_gain": e.config.min_ndcg_gain,
        "baseline_profile_id": None if outcome.baseline_profile_id is None else str(outcome.baseline_profile_id),
    }
    if e.decision == "improved_full_retrieval":
        level = ""
        if e.config.per_proposal:
            level = (
                f"; sign-flip p {e.sign_flip_p:.3g} ≤ {e.config.max_p_value:.3g}, the level look {e.config.look} at "
                f"the partition's proposal {e.config.offline_look} may spend of the {e.config.alpha_budget} budget"
            )
        elif e.config.sequential:
            level = (
                f"; sign-flip p {e.sign_flip_p:.3g} ≤ {e.config.max_p_value:.3g}, the level look {e.config.look} "
                f"may spend of the {e.config.alpha_budget} budget"
            )
        return Verdict(
            True, f"holdout NDCG gain {e.ndcg_gain:+.4f} over {e.coverage.query_groups} groups{level}", facts
        )
    estimate = holdout_groups_needed(e)
    more = estimate.more_groups
    if e.decision == "insufficient_data":  # the minimum first, then power if there is a gain
        more = max(e.config.min_query_groups - e.coverage.query_groups, more or 0)
    needs = _power_needs(estimate, more, "judged holdout queries")
    if e.decision == "insufficient_data" and estimate.more_groups is None:
        needs["needs"] = (
            f"needs at least {more} more judged holdout queries to reach {e.config.min_query_groups}; "
            "no measurable gain so far"
        )
    return Verdict(False, f"holdout gate: {e.decision}", {**facts, **needs}, expected=True)
