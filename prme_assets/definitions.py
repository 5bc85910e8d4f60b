"""The production code location: the learning pipeline's assets, gate checks, jobs, sensors and
schedule, and their resources. The LoCoMo demo is a code location of its own
(``prme_assets.demo.definitions``)."""

import dagster as dg

from prme_assets.activation import (
    activate_profile_job,
    deactivate_profile_job,
    profile_activation_sensor,
    rollback_profile_job,
)
from prme_assets.checks import GATES
from prme_assets.discovery import learning_target_discovery_sensor
from prme_assets.evidence_io import evidence_io_from_env
from prme_assets.holdout import full_retrieval_holdout
from prme_assets.profile import candidate_profile
from prme_assets.proposal import ranking_proposal
from prme_assets.resources import LearningPolicyResource, store_resource_from_env
from prme_assets.schedules import learning_job, nightly_learning_schedule
from prme_assets.snapshot import feedback_snapshot
from prme_assets.split import query_split

LEARNING_ASSETS = [feedback_snapshot, query_split, ranking_proposal, full_retrieval_holdout, candidate_profile]

FORKSERVER_START = {"forkserver": {"preload_modules": ["prme_assets.definitions"]}}
"""Step processes fork from a server that has already imported this code location. A learning
run has twelve steps (five stages, seven gates); spawning each one fresh re-imports Dagster and
``prme_core`` (about 3.5 s a step on 2 cores), forking from the preloaded server does not."""
EXECUTOR = dg.multiprocess_executor.configured({"start_method": FORKSERVER_START}, name="prme_multiprocess")


def build_definitions(resources: dict | None = None) -> dg.Definitions:
    return dg.Definitions(
        assets=list(LEARNING_ASSETS),
        asset_checks=list(GATES),
        jobs=[learning_job, activate_profile_job, deactivate_profile_job, rollback_profile_job],
        sensors=[learning_target_discovery_sensor, profile_activation_sensor],
        schedules=[nightly_learning_schedule],
        executor=EXECUTOR,
        resources=resources
        or {
            "prme_store": store_resource_from_env(),
            "evidence_io": evidence_io_from_env(),
            "learning_policy": LearningPolicyResource(),
        },
    )


defs = build_definitions()
