"""The IO manager: stage outputs are kept as durable evidence in the domain store.

Each output is one append-only operation (``pipeline_artifact``) of the partition's owner: the
model's canonical JSON with its type, asset, partition and run. Loading returns the newest
artifact of that asset and partition, re-validated through its model (a report re-derives its
decision; a tampered row fails its checksum). Every call opens the store briefly, so it works
under the multiprocess executor and on a DuckDB file other steps also use.
"""

from typing import Any

import dagster as dg

from prme_assets.partitions import decode_target
from prme_assets.resources import store_url_from_env
from prme_core.errors import NotFound
from prme_core.learning.evidence import latest_artifact, record_artifact
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.snapshot import SnapshotManifest
from prme_core.learning.stages import HoldoutOutcome, SplitSummary
from prme_core.profiles.model import RankingProfile
from prme_core.storage import Store, open_store
from prme_core.types import FrozenModel

MODELS: dict[str, type[FrozenModel]] = {
    m.__name__: m for m in (SnapshotManifest, SplitSummary, LearningEvaluation, HoldoutOutcome, RankingProfile)
}


def artifact_target(asset_key: dg.AssetKey, partition_key: str) -> str:
    return f"{asset_key.to_user_string()}@{partition_key}"


def store_evidence(store: Store, asset_key: dg.AssetKey, partition: str, run_id: str, obj: FrozenModel) -> dict:
    """Append one stage output of a partition as evidence; the metadata naming the stored operation.
    (The IO manager and the batched learning job both store through here.)"""
    if type(obj).__name__ not in MODELS:
        raise TypeError(
            f"{asset_key.to_user_string()} returned {type(obj).__name__}; the evidence store keeps only {sorted(MODELS)}"
        )
    owner, _ = decode_target(partition)
    body = {
        "model": type(obj).__name__,
        "asset": asset_key.to_user_string(),
        "partition": partition,
        "run_id": run_id,
        "value": obj.canonical_dict(),
    }
    stored = record_artifact(
        store, owner=owner, scope_key=partition, target=artifact_target(asset_key, partition), run_id=run_id, body=body
    )
    return {"evidence_operation": stored.id, "evidence_checksum": stored.checksum}


class EvidenceIOManager(dg.ConfigurableIOManager):
    """Stores stage outputs (frozen models) as append-only operations in the domain store."""

    store_url: str

    def handle_output(self, context: dg.OutputContext, obj: FrozenModel) -> None:
        store = open_store(self.store_url)
        try:
            meta = store_evidence(store, context.asset_key, context.partition_key, context.run_id, obj)
        finally:
            store.close()
        context.add_output_metadata(meta)

    def load_input(self, context: dg.InputContext) -> Any:
        upstream = context.upstream_output
        assert upstream is not None and upstream.asset_key is not None
        partition = context.asset_partition_key
        owner, _ = decode_target(partition)
        store = open_store(self.store_url)
        try:
            body = latest_artifact(store, owner, artifact_target(upstream.asset_key, partition))
        finally:
            store.close()
        if body is None:
            raise NotFound(
                f"no stored {upstream.asset_key.to_user_string()} for partition {partition}; materialize it first"
            )
        return MODELS[body["model"]].model_validate(body["value"])


def evidence_io_from_env() -> EvidenceIOManager:
    return EvidenceIOManager(store_url=store_url_from_env())
