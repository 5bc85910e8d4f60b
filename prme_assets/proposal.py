"""Stage 3: the fitted multiplier proposal and its offline (judged-candidate) evaluation.

Fitted only on a split whose gates passed: after an expected "no" of ``coverage_sufficient`` it
yields nothing, so the later stages are skipped and the run succeeds (``prme_assets.outcome``).
"""

from collections.abc import Iterator

import dagster as dg

from prme_assets.check_records import restated_evaluations
from prme_assets.gate_table import checks_from, guard_verdicts
from prme_assets.metadata import proposal_query_table, stage_link
from prme_assets.outcome import refusal
from prme_assets.partitions import decode_target
from prme_assets.resources import LearningPolicyResource, PrmeStoreResource
from prme_assets.stage import stage_asset
from prme_core.engine import MemoryClient
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.snapshot import FeedbackSnapshot, SnapshotManifest, load_snapshot
from prme_core.learning.stages import SplitSummary, proposal_stage
from prme_core.learning.verdicts import fit_facts


@stage_asset(
    output_required=False,
    description="A ranking adjustment fitted on training groups: with recorded pools, six bounded "
    "multipliers and three interaction weights chosen by re-ranking each judged request's pool for "
    "judged NDCG (pairwise logistic beside it); otherwise six multipliers by pairwise logistic over "
    "the judged candidates. Judged on validation groups by NDCG gain with a seeded bootstrap. "
    "Not computed when the split's gates said no.",
)
def ranking_proposal(
    context: dg.AssetExecutionContext,
    feedback_snapshot: SnapshotManifest,
    query_split: SplitSummary,
    prme_store: PrmeStoreResource,
    learning_policy: LearningPolicyResource,
) -> Iterator[dg.AssetCheckEvaluation | dg.Output[LearningEvaluation]]:
    refused = refusal(context, guard_verdicts("ranking_proposal", {"query_split": query_split}))
    if refused:
        yield from restated_evaluations(
            context.instance, checks_from("ranking_proposal"), context.partition_key, because=refused.summary
        )
        return
    with prme_store.client() as client:  # open while the fit reads recorded pools
        snapshot = load_snapshot(client.store, feedback_snapshot)
        output = proposal_output(client, context.partition_key, snapshot, query_split, learning_policy)
    yield output


def proposal_output(
    client: MemoryClient,
    partition: str,
    snapshot: FeedbackSnapshot,
    query_split: SplitSummary,
    learning_policy: LearningPolicyResource,
) -> dg.Output[LearningEvaluation]:
    """The fit and its offline evaluation for a partition whose split gates passed, on its loaded
    snapshot, kept as evidence the store produced (the asset and the batched learning job share it)."""
    owner, scopes = decode_target(partition)
    report = proposal_stage(
        client.store, snapshot, owner=owner, scopes=scopes, config=learning_policy.learning_config()
    )
    interval = report.validation_gain_interval or (None, None)
    return dg.Output(
        report,
        metadata={
            "decision": report.decision,
            "input_checksum": report.input_checksum,
            "snapshot_sha256": report.snapshot_sha256,
            "snapshot": stage_link("feedback_snapshot"),
            "split": stage_link("query_split"),
            "split_groups": len(query_split.groups),
            "validation_ndcg_gain": report.validation_ndcg_gain if report.validation_ndcg_gain is not None else "—",
            "interval_low": interval[0] if interval[0] is not None else "—",
            "interval_high": interval[1] if interval[1] is not None else "—",
            "min_ndcg_gain": report.config.min_ndcg_gain,
            "training_loss_before": report.training_loss_before if report.training_loss_before is not None else "—",
            "training_loss_after": report.training_loss_after if report.training_loss_after is not None else "—",
            "multipliers": dg.MetadataValue.json(report.multipliers.model_dump()),
            **{k: ("—" if v is None else v) for k, v in fit_facts(report).items()},
            "observed_sd": report.observed_sd if report.observed_sd is not None else "—",
            "groups_for_power": report.groups_for_power if report.groups_for_power is not None else "—",
            "per_query_metrics": proposal_query_table(report),
        },
    )
