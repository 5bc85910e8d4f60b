"""Reading the latest partitioned check results and materializations (Dagster's semi-internal
event-log API is touched here only)."""

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg
from dagster._core.event_api import PartitionKeyFilter
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus


@dataclass(frozen=True)
class CheckState:
    name: str
    passed: bool
    run_id: str | None
    evaluated: bool  # False when the check was planned but its run stopped before it


@dataclass(frozen=True)
class MaterializationState:
    run_id: str
    storage_id: int
    metadata: dict


def latest_materialization(instance: dg.DagsterInstance, asset: str, partition: str) -> MaterializationState | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1
    ).records
    if not records:
        return None
    record = records[0]
    event = record.asset_materialization
    metadata = {k: v.value for k, v in (event.metadata if event else {}).items()}
    return MaterializationState(record.run_id, record.storage_id, metadata)


def latest_checks(instance: dg.DagsterInstance, checks: Sequence[tuple[str, str]], partition: str) -> list[CheckState]:
    """The newest result of each (asset, check) for one partition; a missing result counts as failed."""
    keys = [dg.AssetCheckKey(dg.AssetKey(asset), name) for asset, name in checks]
    found = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        keys, partition_filter=PartitionKeyFilter(key=partition)
    )
    states = []
    for key in keys:
        record = found.get(key)
        if record is None:
            states.append(CheckState(key.name, False, None, False))
            continue
        passed = record.status == AssetCheckExecutionRecordStatus.SUCCEEDED
        evaluated = record.status != AssetCheckExecutionRecordStatus.PLANNED
        evaluation = record.event.asset_check_evaluation if record.event else None
        states.append(CheckState(key.name, passed and bool(evaluation and evaluation.passed), record.run_id, evaluated))
    return states
