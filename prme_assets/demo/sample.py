"""The sample data ``prme main`` learns on without a LoCoMo file (``prme_core.datasets.sample``:
generated from a seed, no third-party text): one asset that stores each owner's memories, judges
real retrievals and registers holdout questions, and its job. Kept out of the demo code
location's ``Definitions`` (which serves LoCoMo); ``prme main`` builds its own."""

import dagster as dg

from prme_assets.demo.progress import current
from prme_assets.resources import PrmeStoreResource
from prme_core.datasets.sample import SAMPLE_OWNERS, SAMPLE_SEED, load_sample, sample_size


class SampleConfig(dg.Config):
    seed: int = SAMPLE_SEED
    """Picks each owner's topics; the same seed stores the same data (and a rerun adds nothing)."""


@dg.asset(
    group_name="demo",
    kinds={"python"},
    description="The generated sample: per owner, memories, judged real retrievals and holdout questions "
    "(one learns, one has too few judgments, one judges inconsistently).",
)
def sample_data(
    context: dg.AssetExecutionContext, config: SampleConfig, prme_store: PrmeStoreResource
) -> dg.MaterializeResult:
    advance = current().task("storing memories and judging retrievals", total=sample_size())
    with prme_store.client() as client:
        loaded = load_sample(client, seed=config.seed, judged=lambda owner: advance(description=f"judging {owner}"))
    stories = {o.owner: o.story for o in SAMPLE_OWNERS}
    for row in loaded:
        context.log.info(f"{row.owner}: {row.memories} memories, {row.judged} judged, {row.holdout_questions} holdout")
    table = "| owner | topics | memories | judged queries | holdout questions | story |\n|---|---|---|---|---|---|\n"
    table += "\n".join(
        f"| {r.owner} | {r.topics} | {r.memories} | {r.judged} | {r.holdout_questions} | {stories[r.owner]} |"
        for r in loaded
    )
    return dg.MaterializeResult(
        metadata={
            "seed": config.seed,
            "owners": len(loaded),
            "memories_stored": sum(r.memories for r in loaded),
            "judged_queries": sum(r.judged for r in loaded),
            "owners_table": dg.MetadataValue.md(table),
        }
    )


sample_demo_job = dg.define_asset_job(
    "sample_demo_job",
    selection=[sample_data],
    description="Store the generated sample's memories, judge real retrievals, register holdouts.",
)


def build_sample_definitions(resources: dict) -> dg.Definitions:
    return dg.Definitions(assets=[sample_data], jobs=[sample_demo_job], resources=resources)
