"""Gate verdicts on a candidate profile: it embeds exactly the gated evidence over a baseline
that still serves, and it can apply to the running pipeline.

Like ``learning.verdicts`` (the stage gates, whose ``Verdict`` these return), they are pure
decisions that ``prme_assets`` checks and the activation op only enforce.
"""

from __future__ import annotations

from uuid import UUID

from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.stages import HoldoutOutcome
from prme_core.learning.verdicts import Verdict
from prme_core.profiles.model import RankingProfile
from prme_core.profiles.registry import inapplicable_reason
from prme_core.retrieval.config import ScoringWeights


def evidence_bound_verdict(
    profile: RankingProfile, proposal: LearningEvaluation, outcome: HoldoutOutcome, active_profile_id: UUID | None
) -> Verdict:
    """The profile embeds exactly the gated evidence, and the baseline it was evaluated against
    is still what serves the scope set (otherwise it is stale and must be re-evaluated)."""
    facts = {
        "profile_id": str(profile.profile_id),
        "proposal_input_checksum": proposal.input_checksum,
        "holdout_input_checksum": None if outcome.evaluation is None else outcome.evaluation.input_checksum,
        "baseline_profile_id": None if profile.baseline_profile_id is None else str(profile.baseline_profile_id),
        "active_profile_id": None if active_profile_id is None else str(active_profile_id),
    }
    if profile.proposal != proposal or outcome.evaluation is None or profile.holdout != outcome.evaluation:
        return Verdict(False, "the profile does not embed the gated proposal and holdout", facts)
    if profile.baseline_profile_id != outcome.baseline_profile_id:
        return Verdict(False, "the profile names a different baseline than the holdout ran against", facts)
    if active_profile_id != profile.baseline_profile_id:
        return Verdict(False, "stale baseline: the active profile changed since the holdout; re-run the holdout", facts)
    return Verdict(True, "the profile embeds both passing reports and its baseline is current", facts)


def runtime_verdict(
    profile: RankingProfile, *, running_features_sha256: str, running_scoring: ScoringWeights
) -> Verdict:
    app = profile.application()
    reason = inapplicable_reason(
        app.feature_identity_sha256,
        app.base_scoring,
        running_features_sha=running_features_sha256,
        running_scoring=running_scoring,
    )
    facts = {
        "recorded_feature_identity": app.feature_identity_sha256,
        "running_feature_identity": running_features_sha256,
        "base_scoring_matches": app.base_scoring == running_scoring,
    }
    if reason is None:
        return Verdict(True, "feature identity and base scoring match the running pipeline", facts)
    return Verdict(False, f"inapplicable to the running pipeline: {reason}", facts)
