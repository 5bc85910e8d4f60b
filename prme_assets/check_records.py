"""Reading the latest partitioned check results and materializations, writing a partition's check
evaluation from the batched learning job, and restating the results of checks a run skipped
(Dagster's semi-internal event-log API is touched here only)."""

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


def materialization_of(
    instance: dg.DagsterInstance, asset: str, partition: str, *, key: str, value: str, limit: int = 50
) -> MaterializationState | None:
    """The newest of the partition's last ``limit`` materializations of ``asset`` whose metadata
    ``key`` is ``value`` (the run that created a given profile, say), or None."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=limit
    ).records
    for record in records:
        event = record.asset_materialization
        metadata = {k: v.value for k, v in (event.metadata if event else {}).items()}
        if metadata.get(key) == value:
            return MaterializationState(record.run_id, record.storage_id, metadata)
    return None


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


RESTATED = "restated_because"
"""The metadata key that marks a restated evaluation (and says why the run did not re-check)."""


def evaluated_here(evaluation: dg.AssetCheckEvaluation) -> bool:
    """False for a restatement: a result an earlier run evaluated, repeated by a run that skipped
    the check (``restated_evaluations``); True for a check this run evaluated."""
    return RESTATED not in evaluation.metadata


RESTATE_HISTORY = 20
"""Evaluations of one check and partition searched for the one of the current materialization."""


def restated_evaluations(
    instance: dg.DagsterInstance, checks: Sequence[tuple[str, str]], partition: str, *, because: str
) -> list[dg.AssetCheckEvaluation]:
    """For checks this run planned but skips (a stage declined): the result each check had for
    the materialization the partition still holds, restated, with the run that evaluated it.

    A planned check that never runs reads "Skipped" in the UI for its partition, even where the
    asset's current materialization (an active profile, say) passed it in an earlier run. Each
    restatement names that run (``evaluated_in_run``) and why this run did not re-check
    (``restated_because``); it targets the same materialization, so it says nothing about
    anything newer, and it is not blocking. A check whose asset has no materialization for the
    partition, or no evaluation of it, stays skipped.
    """
    out = []
    for asset, name in checks:
        current = latest_materialization(instance, asset, partition)
        if current is None:
            continue
        key = dg.AssetCheckKey(dg.AssetKey(asset), name)
        history = instance.event_log_storage.get_asset_check_execution_history(
            key,
            limit=RESTATE_HISTORY,
            status={AssetCheckExecutionRecordStatus.SUCCEEDED, AssetCheckExecutionRecordStatus.FAILED},
            partition_filter=PartitionKeyFilter(key=partition),
        )
        for record in history:
            evaluation = record.event.asset_check_evaluation if record.event else None
            target = evaluation.target_materialization_data if evaluation else None
            if evaluation is not None and target is not None and target.storage_id == current.storage_id:
                break
        else:
            continue
        metadata = {"evaluated_in_run": dg.MetadataValue.dagster_run(record.run_id), **evaluation.metadata}
        metadata[RESTATED] = dg.MetadataValue.text(because)
        out.append(
            dg.AssetCheckEvaluation(
                asset_key=key.asset_key,
                check_name=name,
                passed=evaluation.passed,
                metadata=metadata,
                target_materialization_data=target,
                severity=evaluation.severity,
                description=evaluation.description,
                blocking=False,
                partition=partition,
            )
        )
    return out


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
