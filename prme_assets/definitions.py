"""The production code location: the learning pipeline's assets (the five stages, and
``active_ranking_profile``, which the pointer jobs report), gate checks, jobs, sensors and
schedules (nightly learning, daily receipt retention), and their resources. The LoCoMo demo is a code location of its own
(``prme_assets.demo.definitions``)."""

import dagster as dg

from prme_assets.activation import (
    activate_profile_job,
    active_ranking_profile,
    deactivate_profile_job,
    profile_activation_sensor,
    rollback_profile_job,
)
from prme_assets.batching import learning_batch_job
from prme_assets.checks import GATES
from prme_assets.discovery import learning_target_discovery_sensor
from prme_assets.evidence_io import evidence_io_from_env
from prme_assets.executors import FORKSERVER_START, executor_for
from prme_assets.holdout import full_retrieval_holdout
from prme_assets.profile import candidate_profile
from prme_assets.proposal import ranking_proposal
from prme_assets.resources import LearningPolicyResource, Orchestration, orchestration_from_env, store_resource_from_env
from prme_assets.retention import receipt_retention_job, receipt_retention_schedule
from prme_assets.schedules import build_learning_schedule, learning_job
from prme_assets.snapshot import feedback_snapshot
from prme_assets.split import query_split

LEARNING_ASSETS = [feedback_snapshot, query_split, ranking_proposal, full_retrieval_holdout, candidate_profile]

__all__ = ["FORKSERVER_START", "LEARNING_ASSETS", "build_definitions", "defs"]


def build_definitions(resources: dict | None = None, orchestration: Orchestration | None = None) -> dg.Definitions:
    orchestration = orchestration or Orchestration()
    return dg.Definitions(
        assets=[*LEARNING_ASSETS, active_ranking_profile],
        asset_checks=list(GATES),
        jobs=[
            learning_job,
            learning_batch_job,
            activate_profile_job,
            deactivate_profile_job,
            rollback_profile_job,
            receipt_retention_job,
        ],
        sensors=[learning_target_discovery_sensor, profile_activation_sensor],
        schedules=[
            build_learning_schedule(orchestration.learning_cron, orchestration.batch_size),
            receipt_retention_schedule,
        ],
        executor=executor_for(orchestration),
        resources=resources
        or {
            "prme_store": store_resource_from_env(),
            "evidence_io": evidence_io_from_env(),
            "learning_policy": LearningPolicyResource(),
        },
    )


defs = build_definitions(orchestration=orchestration_from_env())
