"""Job factories importable by child processes (``dg.reconstructable``) for multiprocess tests.

The store comes from ``PRME_STORE_URL``, which the test sets before launching the job.
"""

import os

import dagster as dg

from prme_assets.definitions import FORKSERVER_START, build_definitions
from prme_assets.evidence_io import EvidenceIOManager
from prme_assets.resources import LearningPolicyResource, PrmeStoreResource
from tests.learning_lab import HOLDOUT_CONFIG, LEARNING_CONFIG

SMALL_LAB_POLICY = {**LEARNING_CONFIG, "holdout_min_query_groups": HOLDOUT_CONFIG["min_query_groups"]}
"""The learning lab's small thresholds (``tests.learning_lab``), as the Dagster learning policy."""


def lab_resources(store_url: str) -> dict:
    return {
        "prme_store": PrmeStoreResource(store_url=store_url),
        "evidence_io": EvidenceIOManager(store_url=store_url),
        "learning_policy": LearningPolicyResource(**SMALL_LAB_POLICY),
    }


def multiprocess_learning_job() -> dg.JobDefinition:
    defs = build_definitions(lab_resources(os.environ["PRME_STORE_URL"]))
    return defs.resolve_job_def("prme_learning_job").with_executor_def(
        dg.multiprocess_executor.configured({"max_concurrent": 2, "start_method": FORKSERVER_START})
    )
