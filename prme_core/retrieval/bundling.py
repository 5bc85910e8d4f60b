"""Packing a run: its ranked memories as pack items, packed within the request's token budget
(``packing.pack``), with per-corpus caches of items and entry costs."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from prme_core.retrieval.packing import ContextBundle, entry_cost, pack
from prme_core.retrieval.ranked import Ranked
from prme_core.retrieval.receipt_assembly import opt_int
from prme_core.retrieval.rendering import PackItem
from prme_core.types import from_epoch_us

if TYPE_CHECKING:
    from prme_core.retrieval.pipeline import Run

PACK_ITEMS = "pack_items"
"""The corpus cache (``Corpus.extras``) of each row's pack item, made once per corpus."""


def pack_run(run: Run, ranked: list[Ranked]) -> ContextBundle:
    """The token-budgeted context bundle of a run's ranked memories (each node's pack item is
    built once per corpus and reused; only rank, score and paths change per request)."""
    c = run.corpus
    templates: dict[int, PackItem] = c.extras.setdefault(PACK_ITEMS, {})
    items = []
    for i, r in enumerate(ranked):
        template = templates.get(r.row)
        if template is None:
            template = templates[r.row] = PackItem(
                node_id=c.uuids[r.row],
                rank=0,
                score=0.0,
                node_type=c.node_type[r.row],
                scope=str(c.scope[r.row]),
                content=c.content[r.row],
                event_time=from_epoch_us(opt_int(c.event_us[r.row])),
                created_at=from_epoch_us(int(c.created_us[r.row])),
                valid_from=from_epoch_us(opt_int(c.valid_from_us[r.row])),
                valid_to=from_epoch_us(opt_int(c.valid_to_us[r.row])),
                epistemic_type=c.epistemic_type[r.row],
                session_id=c.session_id[r.row],
            )
        # rank, score and paths are per request; the rest of a node's item never changes
        items.append(template.model_copy(update={"rank": i, "score": r.score, "paths": tuple(sorted(r.paths))}))
    costs: dict[tuple[UUID, str, str], int] = c.extras.setdefault("entry_costs", {})

    def cached_cost(item: PackItem, representation: str, fmt: str) -> int:
        key = (item.node_id, representation, fmt)
        found = costs.get(key)
        if found is None:
            found = costs[key] = entry_cost(item, representation, fmt)  # type: ignore[arg-type]
        return found

    return pack(
        items,
        run.req.packing,
        reference_time=run.req.reference_time,
        temporal_query=run.analysis.intent == "temporal",
        cost=cached_cost,
    )
