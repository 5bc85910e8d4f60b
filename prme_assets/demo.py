"""Demo data: LoCoMo conversations loaded as memories (one owner per conversation)."""

import dagster as dg

from prme_assets.resources import PrmeStoreResource
from prme_core.datasets.locomo import default_locomo_path, load_conversation, read_locomo, select


class LocomoConfig(dg.Config):
    data_path: str = ""
    """A LoCoMo-format JSON file; empty means the development file under ../shared/data/locomo."""
    conversations: list[str] = []
    """Sample ids to load; empty loads every conversation in the file."""
    scope: str = "personal"


@dg.asset(group_name="demo", kinds={"python"},
          description="LoCoMo conversation turns stored as memory nodes, one owner per conversation.")
def locomo_memories(context: dg.AssetExecutionContext, config: LocomoConfig, prme_store: PrmeStoreResource) -> dg.MaterializeResult:
    path = config.data_path or default_locomo_path()
    if not path:
        raise dg.Failure("no LoCoMo data: set data_path or PRME_LOCOMO_PATH (../shared/data/locomo/ is absent)")
    conversations = select(read_locomo(path), config.conversations or None)
    rows = []
    with prme_store.client() as client:
        for conv in conversations:
            added = load_conversation(client, conv, config.scope)
            total = sum(1 for _ in client.iterate(conv.sample_id, page_size=1000))
            rows.append((conv.sample_id, len(conv.turns), added, total, len(conv.questions)))
            context.log.info(f"{conv.sample_id}: {added} new memories, {total} stored")
    table = "| owner | turns | new | stored | questions |\n|---|---|---|---|---|\n" + "\n".join(
        f"| {o} | {t} | {a} | {s} | {q} |" for o, t, a, s, q in rows
    )
    return dg.MaterializeResult(metadata={
        "data_path": dg.MetadataValue.path(str(path)),
        "owners": len(rows),
        "memories_stored": sum(r[3] for r in rows),
        "memories_added": sum(r[2] for r in rows),
        "owners_table": dg.MetadataValue.md(table),
    })


locomo_demo_job = dg.define_asset_job("locomo_demo_job", selection=[locomo_memories],
                                      description="Load LoCoMo memories into the domain store.")
