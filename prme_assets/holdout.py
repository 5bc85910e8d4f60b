"""Stage 4: the full-retrieval holdout — fresh paired retrievals on registered holdout queries.

Materializable by hand from the UI: the typed config overrides the holdout gate's thresholds
for this run only (they are recorded in the report). Run only for a proposal whose offline gate
passed: after an expected "no" it yields nothing and the candidate profile is skipped
(``prme_assets.outcome``).
"""

from collections.abc import Iterator

import dagster as dg

from prme_assets.check_records import restated_evaluations
from prme_assets.gate_table import checks_from, guard_verdicts
from prme_assets.metadata import markdown_table, profile_link, stage_link
from prme_assets.outcome import refusal
from prme_assets.resources import LearningPolicyResource, PrmeStoreResource, api_url_from_env
from prme_assets.stage import stage_asset
from prme_core.engine import MemoryClient
from prme_core.learning.full_retrieval import FullRetrievalEvaluationConfig
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.stages import HoldoutOutcome, holdout_stage
from prme_core.learning.verdicts import regression_bounds


class HoldoutRunConfig(dg.Config):
    """Optional overrides of the holdout gate for one materialization (empty: the policy's)."""

    k: int | None = None
    min_query_groups: int | None = None
    min_ndcg_gain: float | None = None
    max_regression_fraction: float | None = None
    max_mean_harm: float | None = None
    severe_loss: float | None = None
    max_severe_share: float | None = None
    alpha_budget: float | None = None
    """The error budget this partition's holdout looks share (the look's level is derived from it)."""


@stage_asset(
    output_required=False,
    description="Each registered holdout query retrieved twice over frozen memory — what serves now "
    "(active profile or unity) and the proposal — judged on complete relevant sets. "
    "Not run when the offline gate said no.",
)
def full_retrieval_holdout(
    context: dg.AssetExecutionContext,
    config: HoldoutRunConfig,
    ranking_proposal: LearningEvaluation,
    prme_store: PrmeStoreResource,
    learning_policy: LearningPolicyResource,
) -> Iterator[dg.AssetCheckEvaluation | dg.Output[HoldoutOutcome]]:
    refused = refusal(context, guard_verdicts("full_retrieval_holdout", {"ranking_proposal": ranking_proposal}))
    if refused:
        yield from restated_evaluations(
            context.instance, checks_from("full_retrieval_holdout"), context.partition_key, because=refused.summary
        )
        return
    gate = learning_policy.holdout_config(
        k=config.k,
        min_query_groups=config.min_query_groups,
        min_ndcg_gain=config.min_ndcg_gain,
        max_regression_fraction=config.max_regression_fraction,
        max_mean_harm=config.max_mean_harm,
        severe_loss=config.severe_loss,
        max_severe_share=config.max_severe_share,
        alpha_budget=config.alpha_budget,
    )
    with prme_store.client() as client:
        output = holdout_output(client, ranking_proposal, gate)
    outcome, e = output.value, output.value.evaluation
    context.log.info(f"holdout {outcome.status}" + (f": {e.decision}" if e else f": {outcome.message}"))
    yield output


def holdout_output(
    client: MemoryClient, ranking_proposal: LearningEvaluation, gate: FullRetrievalEvaluationConfig
) -> dg.Output[HoldoutOutcome]:
    """The paired retrievals of a proposal whose offline gate passed (the asset and the batched
    learning job share it)."""
    outcome = holdout_stage(client, ranking_proposal, gate)
    meta = {
        "status": outcome.status,
        "proposal_input_checksum": outcome.proposal_input_checksum,
        "baseline_profile_id": str(outcome.baseline_profile_id) if outcome.baseline_profile_id else "unity",
        "baseline_profile": profile_link(outcome.baseline_profile_id, api_url_from_env()),
        "proposal": stage_link("ranking_proposal"),
        "memory_before": outcome.memory_before or "—",
        "memory_after": outcome.memory_after or "—",
    }
    e = outcome.evaluation
    if e is not None:
        interval = e.ndcg_gain_interval or (None, None)
        meta.update(
            {
                "decision": e.decision,
                "ndcg_gain": e.ndcg_gain,
                "recall_gain": e.recall_gain,
                "mrr_gain": e.mrr_gain,
                "interval_low": interval[0] if interval[0] is not None else "—",
                "interval_high": interval[1] if interval[1] is not None else "—",
                **regression_bounds(e),
                "observed_sd": e.observed_sd if e.observed_sd is not None else "—",
                "groups_for_power": e.groups_for_power if e.groups_for_power is not None else "—",
                "query_groups": e.coverage.query_groups,
                "trials": e.coverage.trials,
                "min_query_groups": e.config.min_query_groups,
                "min_ndcg_gain": e.config.min_ndcg_gain,
                "input_checksum": e.input_checksum,
                "feature_identity_sha256": e.feature_identity_sha256,
                "per_group_metrics": markdown_table(
                    ["group", "baseline NDCG", "candidate NDCG", "baseline recall", "candidate recall"],
                    [
                        [q.group_id[:24], q.baseline_ndcg, q.candidate_ndcg, q.baseline_recall, q.candidate_recall]
                        for q in e.queries
                    ],
                ),
            }
        )
    else:
        meta["message"] = outcome.message
    return dg.Output(outcome, metadata=meta)
