"""The one asset decorator of the learning stages: partitioned per (owner, scope set), outputs kept
as evidence in the domain store, and steps that write the store share its pool."""

import dagster as dg

from prme_assets.partitions import LEARNING_TARGETS
from prme_assets.resources import STORE_POOL

GROUP = "prme_learning"


def stage_asset(**kwargs):
    """``dg.asset`` with what every stage shares; each stage adds its description (and
    ``output_required=False`` where an expected "no" of its gates skips what follows)."""
    return dg.asset(
        partitions_def=LEARNING_TARGETS,
        group_name=GROUP,
        kinds={"python"},
        io_manager_key="evidence_io",
        pool=STORE_POOL,
        code_version="1",
        **kwargs,
    )
