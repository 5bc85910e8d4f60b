"""Stage 5: the candidate profile — immutable, embedding the evidence that allowed it.

Created only when every verdict on that evidence passed, re-derived here from the inputs (so
also when materialized without its upstream checks): an expected "no" yields nothing, an
integrity failure fails the step (``prme_assets.outcome``).
"""

from collections.abc import Iterator

import dagster as dg

from prme_assets.check_records import restated_evaluations
from prme_assets.gate_table import checks_from, guard_verdicts
from prme_assets.metadata import BASE_SCORING, profile_link, stage_link
from prme_assets.outcome import record_outcome, refusal
from prme_assets.resources import PrmeStoreResource, api_url_from_env
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
) -> Iterator[dg.AssetCheckEvaluation | dg.Output[RankingProfile]]:
    evidence = {"ranking_proposal": ranking_proposal, "full_retrieval_holdout": full_retrieval_holdout}
    guarded = guard_verdicts("candidate_profile", evidence)
    refused = refusal(context, guarded)
    if refused:
        yield from restated_evaluations(
            context.instance, checks_from("candidate_profile"), context.partition_key, because=refused.summary
        )
        return
    holdout = next(d for d in guarded if d.gate == "holdout_gate_passed")
    with prme_store.client() as client:
        output = profile_output(client, ranking_proposal, full_retrieval_holdout)
    record_outcome(context, holdout, profile_id=str(output.value.profile_id))
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
    api_url = api_url_from_env()
    return dg.Output(
        profile,
        metadata={
            "profile_id": str(profile.profile_id),
            "profile": profile_link(profile.profile_id, api_url),
            "owner": profile.owner,
            "scopes": "+".join(profile.scopes),
            "baseline_profile_id": str(profile.baseline_profile_id) if profile.baseline_profile_id else BASE_SCORING,
            "baseline_profile": profile_link(profile.baseline_profile_id, api_url),
            "proposal": stage_link("ranking_proposal"),
            "holdout": stage_link("full_retrieval_holdout"),
            "proposal_input_checksum": ranking_proposal.input_checksum,
            "holdout_input_checksum": holdout.input_checksum,
            "profile_checksum": profile.checksum(),
            "multipliers": dg.MetadataValue.json(profile.multipliers.model_dump()),
            "offline_gain": ranking_proposal.validation_ndcg_gain,
            "holdout_gain": holdout.ndcg_gain,
        },
    )
