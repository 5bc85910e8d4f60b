"""Gate verdicts: the pure decisions an orchestrator's checks enforce (and nothing else).

Each function takes the persisted output of a stage (plus, where needed, the live pointer or
the running pipeline's identity) and returns whether the gate passed, a one-line reason and the
facts a person checks first. ``prme_assets.checks`` only maps these to asset-check results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from prme_core.learning.bootstrap import CONFIDENCE
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.stages import HoldoutOutcome, SplitSummary
from prme_core.profiles.model import RankingProfile
from prme_core.profiles.registry import inapplicable_reason
from prme_core.retrieval.config import ScoringWeights


@dataclass(frozen=True)
class Verdict:
    passed: bool
    description: str
    facts: dict[str, Any] = field(default_factory=dict)


def coverage_verdict(split: SplitSummary) -> Verdict:
    c = split.coverage
    facts = {"training_groups": c.training_queries, "validation_groups": c.validation_queries,
             "min_training_groups": split.min_training_queries, "min_validation_groups": split.min_validation_queries,
             "requests_with_pairs": c.requests_with_pairs, "explicit_pairs": c.explicit_pairs,
             "feedback_records": c.feedback_records, **{f"excluded_{k}": v for k, v in split.exclusions.items()}}
    if split.coverage_sufficient:
        return Verdict(True, f"{c.training_queries} training and {c.validation_queries} validation groups", facts)
    return Verdict(False, f"insufficient coverage: {c.training_queries}/{split.min_training_queries} training and "
                          f"{c.validation_queries}/{split.min_validation_queries} validation groups; collect more "
                          "judged queries for this scope set", facts)


def replay_verdict(split: SplitSummary) -> Verdict:
    facts = {"judged_candidates": split.replay_candidates, "mismatches": split.replay_mismatches,
             "largest_difference": split.replay_worst_difference}
    if split.replay_exact:
        return Verdict(True, f"all {split.replay_candidates} judged candidates replay exactly at unity", facts)
    return Verdict(False, f"{split.replay_mismatches} judged candidates do not replay to their recorded scores; "
                          "the receipts cannot support learning", facts)


def offline_gate_verdict(proposal: LearningEvaluation) -> Verdict:
    interval = proposal.validation_gain_interval
    facts = {"decision": proposal.decision, "validation_ndcg_gain": proposal.validation_ndcg_gain,
             "interval_low": None if interval is None else interval[0],
             "interval_high": None if interval is None else interval[1],
             "validation_pairwise_gain": proposal.validation_pairwise_gain,
             "min_ndcg_gain": proposal.config.min_ndcg_gain, "input_checksum": proposal.input_checksum,
             **{f"multiplier_{k}": v for k, v in proposal.multipliers.model_dump().items()}}
    if proposal.decision == "improved_on_observed_candidates":
        return Verdict(True, f"validation NDCG gain {proposal.validation_ndcg_gain:+.4f}, {CONFIDENCE:.0%} interval "
                             f"[{interval[0]:+.4f}, {interval[1]:+.4f}]", facts)  # type: ignore[index]
    return Verdict(False, f"offline gate: {proposal.decision}", facts)


def holdout_memory_verdict(outcome: HoldoutOutcome) -> Verdict:
    facts = {"status": outcome.status, "memory_before": outcome.memory_before, "memory_after": outcome.memory_after}
    if outcome.status == "memory_changed":
        return Verdict(False, "memory changed while the holdout ran; pause writes for this owner and rerun", facts)
    if outcome.status != "evaluated":
        return Verdict(False, f"no holdout evaluation ({outcome.status}): {outcome.message}", facts)
    return Verdict(outcome.memory_before == outcome.memory_after, "memory unchanged across all paired retrievals", facts)


def holdout_gate_verdict(outcome: HoldoutOutcome) -> Verdict:
    e = outcome.evaluation
    if e is None:
        return Verdict(False, f"no holdout evaluation ({outcome.status}): {outcome.message}", {"status": outcome.status})
    interval = e.ndcg_gain_interval
    facts = {"decision": e.decision, "ndcg_gain": e.ndcg_gain, "recall_gain": e.recall_gain, "mrr_gain": e.mrr_gain,
             "interval_low": None if interval is None else interval[0],
             "interval_high": None if interval is None else interval[1],
             "regression_fraction": e.regression_fraction, "query_groups": e.coverage.query_groups,
             "min_query_groups": e.config.min_query_groups, "min_ndcg_gain": e.config.min_ndcg_gain,
             "max_regression_fraction": e.config.max_regression_fraction,
             "baseline_profile_id": None if outcome.baseline_profile_id is None else str(outcome.baseline_profile_id)}
    if e.decision == "improved_full_retrieval":
        return Verdict(True, f"holdout NDCG gain {e.ndcg_gain:+.4f} over {e.coverage.query_groups} groups", facts)
    return Verdict(False, f"holdout gate: {e.decision}", facts)


def evidence_bound_verdict(profile: RankingProfile, proposal: LearningEvaluation, outcome: HoldoutOutcome,
                           active_profile_id: UUID | None) -> Verdict:
    """The profile embeds exactly the gated evidence, and the baseline it was evaluated against
    is still what serves the scope set (otherwise it is stale and must be re-evaluated)."""
    facts = {"profile_id": str(profile.profile_id), "proposal_input_checksum": proposal.input_checksum,
             "holdout_input_checksum": None if outcome.evaluation is None else outcome.evaluation.input_checksum,
             "baseline_profile_id": None if profile.baseline_profile_id is None else str(profile.baseline_profile_id),
             "active_profile_id": None if active_profile_id is None else str(active_profile_id)}
    if profile.proposal != proposal or outcome.evaluation is None or profile.holdout != outcome.evaluation:
        return Verdict(False, "the profile does not embed the gated proposal and holdout", facts)
    if profile.baseline_profile_id != outcome.baseline_profile_id:
        return Verdict(False, "the profile names a different baseline than the holdout ran against", facts)
    if active_profile_id != profile.baseline_profile_id:
        return Verdict(False, "stale baseline: the active profile changed since the holdout; re-run the holdout", facts)
    return Verdict(True, "the profile embeds both passing reports and its baseline is current", facts)


def runtime_verdict(profile: RankingProfile, *, running_features_sha256: str, running_scoring: ScoringWeights) -> Verdict:
    app = profile.application()
    reason = inapplicable_reason(app.feature_identity_sha256, app.base_scoring,
                                 running_features_sha=running_features_sha256, running_scoring=running_scoring)
    facts = {"recorded_feature_identity": app.feature_identity_sha256, "running_feature_identity": running_features_sha256,
             "base_scoring_matches": app.base_scoring == running_scoring}
    if reason is None:
        return Verdict(True, "feature identity and base scoring match the running pipeline", facts)
    return Verdict(False, f"inapplicable to the running pipeline: {reason}", facts)
