"""The demo code location: the LoCoMo data assets and their job, apart from the production
learning pipeline (``prme_assets.definitions``). ``workspace.yaml`` loads both."""

import dagster as dg

from prme_assets.demo.assets import locomo_demo_job, locomo_feedback, locomo_memories
from prme_assets.resources import store_resource_from_env

EXECUTOR = dg.multiprocess_executor.configured(
    {"start_method": {"forkserver": {"preload_modules": ["prme_assets.demo.definitions"]}}},
    name="prme_demo_multiprocess",
)
"""Like the production location's executor: steps fork from a server that has imported this module."""


def build_demo_definitions(resources: dict | None = None) -> dg.Definitions:
    return dg.Definitions(
        assets=[locomo_memories, locomo_feedback],
        jobs=[locomo_demo_job],
        executor=EXECUTOR,
        resources=resources or {"prme_store": store_resource_from_env()},
    )


defs = build_demo_definitions()
