"""Demo data: LoCoMo conversations loaded as memories (one owner per conversation), judged
retrievals and registered holdout questions, and the job that runs both."""

from pathlib import Path

import dagster as dg

from prme_assets.demo.data import find_locomo_data
from prme_assets.demo.progress import current
from prme_assets.resources import PrmeStoreResource
from prme_core.datasets.locomo import (
    LocomoDataNotFound,
    load_conversation,
    read_locomo,
    record_feedback,
    register_holdout,
    split_questions,
)


class LocomoConfig(dg.Config):
    data_path: str = ""
    """A LoCoMo-format JSON file; empty means PRME_LOCOMO_PATH, else the development file
    ../shared/data/locomo/locomo-dev.json (from the working directory, then the checkout)."""
    conversations: list[str] = []
    """Sample ids to load; empty loads every conversation in the file."""
    scope: str = "personal"


def _data_path(config: LocomoConfig) -> Path:
    try:
        return find_locomo_data(config.data_path or None)
    except LocomoDataNotFound as exc:
        raise dg.Failure(f"{exc} (or set this asset's data_path)") from exc


@dg.asset(
    group_name="demo",
    kinds={"python"},
    description="LoCoMo conversation turns stored as memory nodes, one owner per conversation.",
)
def locomo_memories(
    context: dg.AssetExecutionContext, config: LocomoConfig, prme_store: PrmeStoreResource
) -> dg.MaterializeResult:
    path = _data_path(config)
    conversations = read_locomo(path, config.conversations or None)
    rows = []
    advance = current().task("storing conversations", total=len(conversations))
    with prme_store.client() as client:
        for conv in conversations:
            advance(0, description=f"storing {conv.sample_id}")
            added = load_conversation(client, conv, config.scope)
            advance()
            total = sum(1 for _ in client.iterate(conv.sample_id, page_size=1000))
            rows.append((conv.sample_id, len(conv.turns), added, total, len(conv.questions)))
            context.log.info(f"{conv.sample_id}: {added} new memories, {total} stored")
    table = "| owner | turns | new | stored | questions |\n|---|---|---|---|---|\n" + "\n".join(
        f"| {o} | {t} | {a} | {s} | {q} |" for o, t, a, s, q in rows
    )
    return dg.MaterializeResult(
        metadata={
            "data_path": dg.MetadataValue.path(str(path)),
            "owners": len(rows),
            "memories_stored": sum(r[3] for r in rows),
            "memories_added": sum(r[2] for r in rows),
            "owners_table": dg.MetadataValue.md(table),
        }
    )


JUDGED_PER_STEP = 10
"""Feedback questions judged between two progress updates."""


class LocomoFeedbackConfig(LocomoConfig):
    limit: int = 20
    """Results per feedback retrieval (and per holdout question)."""


@dg.asset(
    group_name="demo",
    kinds={"python"},
    deps=[locomo_memories],
    description="Structured-evaluation feedback on real retrievals for ~60% of each conversation's questions "
    "(hash split), and the rest registered as holdout questions with their complete evidence.",
)
def locomo_feedback(
    context: dg.AssetExecutionContext, config: LocomoFeedbackConfig, prme_store: PrmeStoreResource
) -> dg.MaterializeResult:
    path = _data_path(config)
    rows = []
    conversations = read_locomo(path, config.conversations or None)
    splits = {conv.sample_id: split_questions(conv) for conv in conversations}
    advance = current().task("judging retrievals", total=sum(len(s.feedback) for s in splits.values()))
    with prme_store.client() as client:
        for conv in conversations:
            split = splits[conv.sample_id]
            counts = {"recorded": 0}
            for start in range(0, len(split.feedback), JUDGED_PER_STEP):  # steps, for the progress bar
                chunk = split.feedback[start : start + JUDGED_PER_STEP]
                done = record_feedback(client, conv, chunk, limit=config.limit, scope=config.scope)
                counts["recorded"] += done["recorded"]
                advance(len(chunk), description=f"judging {conv.sample_id}")
            holdouts = register_holdout(client, conv, split.holdout, limit=config.limit, scope=config.scope)
            rows.append(
                (
                    conv.sample_id,
                    len(split.feedback),
                    counts["recorded"],
                    holdouts,
                    split.without_evidence,
                    len(split.unresolved_evidence_ids),
                )
            )
            context.log.info(f"{conv.sample_id}: {counts['recorded']} new judgments, {holdouts} holdout questions")
    table = (
        "| owner | feedback questions | new judgments | holdout questions | without evidence | unresolved ids |\n"
        "|---|---|---|---|---|---|\n" + "\n".join("| " + " | ".join(map(str, r)) + " |" for r in rows)
    )
    return dg.MaterializeResult(
        metadata={
            "owners": len(rows),
            "feedback_questions": sum(r[1] for r in rows),
            "new_judgments": sum(r[2] for r in rows),
            "holdout_questions": sum(r[3] for r in rows),
            "unresolved_evidence_ids": sum(r[5] for r in rows),
            "owners_table": dg.MetadataValue.md(table),
        }
    )


locomo_demo_job = dg.define_asset_job(
    "locomo_demo_job",
    selection=[locomo_memories, locomo_feedback],
    description="Load LoCoMo memories, judge real retrievals, register holdouts.",
)
