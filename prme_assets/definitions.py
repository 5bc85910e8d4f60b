"""The code location: every asset, check, job, sensor and schedule, and their resources."""

from __future__ import annotations

import dagster as dg

from prme_assets.demo import locomo_demo_job, locomo_memories
from prme_assets.resources import store_resource_from_env


def build_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[locomo_memories],
        jobs=[locomo_demo_job],
        resources={"prme_store": store_resource_from_env()},
    )


defs = build_definitions()
