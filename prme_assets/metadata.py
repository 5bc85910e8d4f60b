"""Metadata builders: what a person checks first on each materialization and check."""

from typing import Any

import dagster as dg

from prme_core.learning.proposal import LearningEvaluation

MAX_TABLE_ROWS = 25
BASE_SCORING = "base scoring"
PROFILE_ROUTE = "/v1/profiles/"
"""The HTTP API route that serves one ranking profile (with its evidence and status)."""


def value(v: Any) -> Any:
    """A metadata value: floats and ints as numbers, None as text, anything else as text."""
    if v is None:
        return dg.MetadataValue.text("—")
    if isinstance(v, bool):
        return dg.MetadataValue.bool(v)
    if isinstance(v, int):
        return dg.MetadataValue.int(v)
    if isinstance(v, float):
        return dg.MetadataValue.float(v)
    return dg.MetadataValue.text(str(v))


def facts(mapping: dict[str, Any]) -> dict[str, Any]:
    return {k: value(v) for k, v in mapping.items()}


def profile_link(profile_id: Any, api_url: str) -> dg.MetadataValue:
    """A profile as a link to the HTTP API route that serves it (open it with an operator key of
    its owner), or "base scoring" when there is none."""
    if not profile_id:
        return dg.MetadataValue.text(BASE_SCORING)
    return dg.MetadataValue.url(f"{api_url.rstrip('/')}{PROFILE_ROUTE}{profile_id}")


def profile_links(mapping: dict[str, Any], api_url: str) -> dict[str, dg.MetadataValue]:
    """A link beside each ``*profile_id`` that names a profile: ``baseline_profile_id`` gets
    ``baseline_profile``."""
    return {
        key.removesuffix("_id"): profile_link(v, api_url)
        for key, v in mapping.items()
        if key.endswith("profile_id") and v and v != BASE_SCORING
    }


def stage_link(asset: str) -> dg.MetadataValue:
    """A link to a stage's asset (its partitions list every materialization with its evidence)."""
    return dg.MetadataValue.asset(dg.AssetKey(asset))


def markdown_table(header: list[str], rows: list[list[Any]]) -> dg.MetadataValue:
    shown = rows[:MAX_TABLE_ROWS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in shown:
        lines.append("| " + " | ".join(f"{c:.4f}" if isinstance(c, float) else str(c) for c in row) + " |")
    if len(rows) > len(shown):
        lines.append(f"\n… {len(rows) - len(shown)} more rows (the stored evidence holds all of them)")
    return dg.MetadataValue.md("\n".join(lines))


def proposal_query_table(report: LearningEvaluation) -> dg.MetadataValue:
    ordered = sorted(report.queries, key=lambda q: (q.split != "validation", q.group_id))
    return markdown_table(
        ["group", "split", "requests", "baseline NDCG", "candidate NDCG", "baseline pairwise", "candidate pairwise"],
        [
            [
                q.group_id[:12],
                q.split,
                len(q.request_ids),
                q.baseline_ndcg,
                q.candidate_ndcg,
                q.baseline_pairwise_accuracy,
                q.candidate_pairwise_accuracy,
            ]
            for q in ordered
        ],
    )
