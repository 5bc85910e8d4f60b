"""Stage 2: query groups, the train/validation split, coverage and exact baseline replay."""

import dagster as dg

from prme_assets.metadata import markdown_table, stage_link
from prme_assets.partitions import decode_target
from prme_assets.resources import LearningPolicyResource, PrmeStoreResource
from prme_assets.stage import stage_asset
from prme_core.learning.snapshot import FeedbackSnapshot, SnapshotManifest, load_snapshot
from prme_core.learning.stages import SplitSummary, split_stage


@stage_asset(
    description="Normalized query groups assigned to train or validation by a fixed hash (adding feedback "
    "never moves a group), with the label exclusions and the unity replay check.",
)
def query_split(
    context: dg.AssetExecutionContext,
    feedback_snapshot: SnapshotManifest,
    prme_store: PrmeStoreResource,
    learning_policy: LearningPolicyResource,
) -> dg.Output[SplitSummary]:
    with prme_store.client() as client:  # open while the split reads recorded pools
        snapshot = load_snapshot(client.store, feedback_snapshot)
        return split_output(context.partition_key, snapshot, learning_policy)


def split_output(
    partition: str, snapshot: FeedbackSnapshot, learning_policy: LearningPolicyResource
) -> dg.Output[SplitSummary]:
    """The stage's work for one partition on its loaded snapshot (the asset and the batched
    learning job share it)."""
    owner, scopes = decode_target(partition)
    summary = split_stage(snapshot, owner=owner, scopes=scopes, config=learning_policy.learning_config())
    c = summary.coverage
    return dg.Output(
        summary,
        metadata={
            "snapshot_sha256": summary.snapshot_sha256,
            "snapshot": stage_link("feedback_snapshot"),
            "training_groups": c.training_queries,
            "validation_groups": c.validation_queries,
            "requests_with_pairs": c.requests_with_pairs,
            "explicit_pairs": c.explicit_pairs,
            "coverage_sufficient": summary.coverage_sufficient,
            "replay_exact": summary.replay_exact,
            "fit_path": summary.fit_path or "judged",
            "fit_reason": summary.fit_reason or "—",
            "exclusions": dg.MetadataValue.json(summary.exclusions),
            "groups": markdown_table(
                ["group", "split", "requests"], [[g.group_id[:12], g.split, g.requests] for g in summary.groups]
            ),
        },
    )
