"""Stage 1: the feedback snapshot cut of one (owner, scope set) partition."""

import dagster as dg

from prme_assets.partitions import decode_target
from prme_assets.resources import LearningPolicyResource, PrmeStoreResource
from prme_assets.stage import stage_asset
from prme_core.engine import MemoryClient
from prme_core.learning.discovery import feedback_fingerprint
from prme_core.learning.snapshot import SnapshotManifest


@stage_asset(
    description="One bounded cut of the owner's relevance records with their verified receipts "
    "(fails past max_records, never truncates). Its data version is the snapshot checksum.",
)
def feedback_snapshot(
    context: dg.AssetExecutionContext, prme_store: PrmeStoreResource, learning_policy: LearningPolicyResource
) -> dg.Output[SnapshotManifest]:
    with prme_store.client() as client:
        return snapshot_output(client, context.partition_key, learning_policy)


def snapshot_output(
    client: MemoryClient, partition: str, learning_policy: LearningPolicyResource
) -> dg.Output[SnapshotManifest]:
    """The stage's work for one partition (the asset and the batched learning job share it)."""
    owner, scopes = decode_target(partition)
    fingerprint = feedback_fingerprint(client.store, owner)
    snapshot = client.snapshot_feedback(owner, max_records=learning_policy.max_records)
    manifest = snapshot.manifest()
    in_scope = sum(1 for r in snapshot.records if r.scope_key == "+".join(scopes))
    return dg.Output(
        manifest,
        data_version=dg.DataVersion(manifest.snapshot_sha256),
        metadata={
            "owner": owner,
            "scopes": "+".join(scopes),
            "snapshot_sha256": manifest.snapshot_sha256,
            "feedback_records": len(manifest.feedback_ids),
            "records_in_this_scope_set": in_scope,
            "receipts": len(manifest.receipt_checksums),
            "max_records": learning_policy.max_records,
            "feedback_fingerprint": fingerprint,
        },
    )
