"""In-process Dagster runs of the learning lab's partition, and what the tests read back from them."""

from collections.abc import Iterable
from typing import Any

import dagster as dg
import pytest

import prme_assets.split as split_asset
from prme_assets.checks import GATES
from prme_assets.definitions import LEARNING_ASSETS
from prme_assets.partitions import encode_target
from prme_core.learning.stages import SplitSummary
from tests.dagster_jobs import lab_resources
from tests.learning_lab import LAB_OWNER, LAB_SCOPES

LAB_PARTITION = encode_target(LAB_OWNER, LAB_SCOPES)


def run_lab(
    url: str,
    instance: dg.DagsterInstance,
    assets: Iterable = (*LEARNING_ASSETS, *GATES),
    resources: dict | None = None,
    **kw: Any,
):
    """Materialize ``assets`` (default: the pipeline and its gates) for the lab's partition with
    ``resources`` (default: the lab's), errors kept in the result."""
    return dg.materialize(
        list(assets),
        partition_key=LAB_PARTITION,
        instance=instance,
        resources=resources or lab_resources(url),
        raise_on_error=False,
        **kw,
    )


def check_evaluation(result, name: str) -> tuple[dg.AssetCheckEvaluation, dict[str, Any]]:
    """The run's one evaluation of check ``name`` and its metadata values."""
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation, {k: v.value for k, v in evaluation.metadata.items()}


def materialized(result) -> set[str]:
    """The asset keys the run materialized."""
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def plant_replay_mismatches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the split stage report two baseline replay mismatches (an integrity failure)."""
    original = split_asset.split_stage

    def split_with_mismatches(*args, **kw):
        summary = original(*args, **kw)
        return SplitSummary(**{**dict(summary), "replay_mismatches": 2, "replay_worst_difference": 0.5})

    monkeypatch.setattr(split_asset, "split_stage", split_with_mismatches)
