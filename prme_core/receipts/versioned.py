"""How a receipt's parts read and write across schema versions: traces named by the version's
feature layout, candidates in their canonical form, and configuration fields a later version
introduced (recorded explicitly from that version on, meaning their historical value before)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prme_core.features import FeatureLayout
from prme_core.retrieval.config import PackingConfig, ScoringWeights

if TYPE_CHECKING:
    from prme_core.receipts.model import ReceiptCandidate


def trace_by_layout(candidate: Any, layout: FeatureLayout) -> Any:
    """A parsed candidate's positional trace array named by its receipt version's layout."""
    if not isinstance(candidate, dict):
        return candidate
    prov = candidate.get("provenance")
    if not isinstance(prov, dict) or not isinstance(prov.get("trace"), (list, tuple)):
        return candidate
    trace = prov["trace"]
    if len(trace) != len(layout.trace_fields):
        raise ValueError(
            f"a score trace of this receipt version holds {len(layout.trace_fields)} numbers in the "
            f"order {layout.trace_fields}"
        )
    return {**candidate, "provenance": {**prov, "trace": dict(zip(layout.trace_fields, trace))}}


def candidate_dict(c: ReceiptCandidate, layout: FeatureLayout) -> dict[str, Any]:
    data: dict[str, Any] = {
        "node_id": str(c.node_id),
        "scope": c.scope,
        "content_sha256": c.content_sha256,
        "score": c.score,
        "paths": list(c.paths),
        "in_context": c.in_context,
        "has_content": c.has_content,
        "token_cost": c.token_cost,
    }
    if c.cross_scope:
        data["cross_scope"] = True
    if c.reranker_score is not None:
        data["reranker_score"] = c.reranker_score
    if c.in_context:
        data["context_position"] = c.context_position
        data["representation"] = c.representation
    if c.provenance is not None:
        p = c.provenance
        prov: dict[str, Any] = {
            "formula_version": p.formula_version,
            "weights": p.weights,
            "trace": p.trace.as_array(layout),
        }
        if p.base_node_id != c.node_id:
            prov["base_node_id"] = str(p.base_node_id)
        if p.adjustments:
            prov["adjustments"] = [a.canonical_dict() for a in p.adjustments]
        if p.rank_fusion is not None:
            prov["rank_fusion"] = p.rank_fusion.model_dump(mode="json", exclude_none=True)
        data["provenance"] = prov
    return data


def apply_history(
    value: Any,
    history: tuple[tuple[str, int, Any], ...],
    version: int,
    where: str,
    model: type[ScoringWeights] | type[PackingConfig],
) -> Any:
    """Check a versioned sub-object: every field is recorded explicitly, except those a later
    version introduced, which an older receipt may not record (parsing fills their historical
    meaning). A model instance (from code, not JSON) may carry a later field only at its
    historical value, which is then dropped."""
    from_model = isinstance(value, ScoringWeights | PackingConfig)
    if from_model:
        value = value.model_dump()
    if not isinstance(value, dict):
        return value
    value = dict(value)
    for name, since, historical in history:
        if version < since:
            if name in value and not (from_model and value[name] == historical):
                raise ValueError(
                    f"{where}.{name} was introduced in receipt version {since}; a version {version} "
                    "receipt cannot record it"
                )
            value[name] = historical
    newer = {name for name, since, _ in history if version < since}
    missing = [f for f in model.model_fields if f not in value and f not in newer]
    if missing:
        raise ValueError(f"a version {version} receipt must record {where}.{missing[0]} explicitly")
    return value


def drop_newer(data: dict[str, Any], history: tuple[tuple[str, int, Any], ...], version: int) -> dict[str, Any]:
    for name, since, _ in history:
        if version < since:
            data.pop(name, None)
    return data
