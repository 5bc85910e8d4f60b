"""Stage 5: the candidate profile — immutable, embedding the evidence that allowed it."""

import dagster as dg

from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.stages import HoldoutOutcome, candidate_profile_id
from prme_core.profiles.model import RankingProfile

from prme_assets.partitions import LEARNING_TARGETS
from prme_assets.resources import STORE_POOL, PrmeStoreResource
from prme_assets.snapshot import GROUP


@dg.asset(partitions_def=LEARNING_TARGETS, group_name=GROUP, kinds={"python"}, io_manager_key="evidence_io",
          pool=STORE_POOL, code_version="1",
          description="An immutable ranking profile created from the two passing reports (its id derives from "
                      "them, so re-materializing creates no duplicate). Creating it activates nothing.")
def candidate_profile(context: dg.AssetExecutionContext, ranking_proposal: LearningEvaluation,
                      full_retrieval_holdout: HoldoutOutcome, prme_store: PrmeStoreResource) -> dg.Output[RankingProfile]:
    holdout = full_retrieval_holdout.evaluation
    if holdout is None:
        raise dg.Failure(f"no holdout evaluation ({full_retrieval_holdout.status}); the holdout checks should "
                         "have stopped this run")
    with prme_store.client() as client:
        profile = client.create_ranking_profile(
            ranking_proposal, holdout, owner=ranking_proposal.owner,
            profile_id=candidate_profile_id(ranking_proposal, holdout),
            baseline_profile_id=full_retrieval_holdout.baseline_profile_id)
    return dg.Output(profile, metadata={
        "profile_id": str(profile.profile_id), "owner": profile.owner, "scopes": "+".join(profile.scopes),
        "baseline_profile_id": str(profile.baseline_profile_id) if profile.baseline_profile_id else "base scoring",
        "proposal_input_checksum": ranking_proposal.input_checksum, "holdout_input_checksum": holdout.input_checksum,
        "profile_checksum": profile.checksum(), "multipliers": dg.MetadataValue.json(profile.multipliers.model_dump()),
        "offline_gain": ranking_proposal.validation_ndcg_gain, "holdout_gain": holdout.ndcg_gain,
    })
