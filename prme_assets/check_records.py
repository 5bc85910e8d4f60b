"""Reading the latest partitioned check results and materializations, and writing a partition's check
evaluation from the batched learning job (Dagster's semi-internal event-log API is touched here only)."""

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import AssetCheckEvaluationTargetMaterializationData
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


def check_evaluation(
    instance: dg.DagsterInstance,
    check: dg.AssetCheckKey,
    partition: str,
    result: dg.AssetCheckResult,
    *,
    blocking: bool,
) -> dg.AssetCheckEvaluation:
    """``result`` as the evaluation of ``check`` for one partition, bound to the partition's newest
    materialization of the checked asset (what Dagster records for a check step of that partition)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=check.asset_key, asset_partitions=[partition]), limit=1
    ).records
    target = (
        AssetCheckEvaluationTargetMaterializationData(
            run_id=records[0].run_id, storage_id=records[0].storage_id, timestamp=records[0].timestamp
        )
        if records
        else None
    )
    return dg.AssetCheckEvaluation(
        asset_key=check.asset_key,
        check_name=check.name,
        passed=result.passed,
        metadata=result.metadata,
        target_materialization_data=target,
        severity=result.severity,
        description=result.description,
        blocking=blocking,
        partition=partition,
    )
