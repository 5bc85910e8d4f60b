"""Stage 5: the candidate profile — immutable, embedding the evidence that allowed it.

Created only when every verdict on that evidence passed, re-derived here from the inputs (so
also when materialized without its upstream checks): an expected "no" yields nothing, an
integrity failure fails the step (``prme_assets.outcome``).
"""

from collections.abc import Iterator

import dagster as dg

from prme_assets.gate_table import guard_verdicts
from prme_assets.outcome import record_outcome, refusal
from prme_assets.resources import PrmeStoreResource
from prme_assets.stage import stage_asset
from prme_core.engine import MemoryClient
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.stages import HoldoutOutcome, candidate_profile_id
from prme_core.profiles.model import RankingProfile


@stage_asset(
    output_required=False,
    description="An immutable ranking profile created from the two passing reports (its id derives from "
    "them, so re-materializing creates no duplicate). Creating it activates nothing. Not "
    "created unless every gate on its evidence passed.",
)
def candidate_profile(
    context: dg.AssetExecutionContext,
    ranking_proposal: LearningEvaluation,
    full_retrieval_holdout: HoldoutOutcome,
    prme_store: PrmeStoreResource,
) -> Iterator[dg.Output[RankingProfile]]:
    evidence = {"ranking_proposal": ranking_proposal, "full_retrieval_holdout": full_retrieval_holdout}
    guarded = guard_verdicts("candidate_profile", evidence)
    if refusal(context, guarded):
        return
    holdout_verdict = dict(guarded)["holdout_gate_passed"]
    with prme_store.client() as client:
        output = profile_output(client, ranking_proposal, full_retrieval_holdout)
    record_outcome(context, "holdout_gate_passed", holdout_verdict, profile_id=str(output.value.profile_id))
    yield output


def profile_output(
    client: MemoryClient, ranking_proposal: LearningEvaluation, full_retrieval_holdout: HoldoutOutcome
) -> dg.Output[RankingProfile]:
    """Create the profile of evidence whose every verdict passed (the asset and the batched
    learning job share it; both check the verdicts first)."""
    holdout = full_retrieval_holdout.evaluation
    assert holdout is not None  # the holdout gate passed
    profile = client.create_ranking_profile(
        ranking_proposal,
        holdout,
        owner=ranking_proposal.owner,
        profile_id=candidate_profile_id(ranking_proposal, holdout),
        baseline_profile_id=full_retrieval_holdout.baseline_profile_id,
    )
    return dg.Output(
        profile,
        metadata={
            "profile_id": str(profile.profile_id),
            "owner": profile.owner,
            "scopes": "+".join(profile.scopes),
            "baseline_profile_id": str(profile.baseline_profile_id) if profile.baseline_profile_id else "base scoring",
            "proposal_input_checksum": ranking_proposal.input_checksum,
            "holdout_input_checksum": holdout.input_checksum,
            "profile_checksum": profile.checksum(),
            "multipliers": dg.MetadataValue.json(profile.multipliers.model_dump()),
            "offline_gain": ranking_proposal.validation_ndcg_gain,
            "holdout_gain": holdout.ndcg_gain,
        },
    )
