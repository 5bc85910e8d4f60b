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


CELERY_QUEUE_ENV = "PRME_TEST_CELERY_QUEUE"


def celery_batch_job() -> dg.JobDefinition:
    """Two batches of the batched learning op in one run, on the Celery executor: their steps
    are independent, so two idle workers take one each. The queue is the test's own."""
    from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG

    from prme_assets.batching import learn_partitions
    from prme_assets.executors import celery_executor
    from prme_assets.resources import Orchestration

    queue = {DAGSTER_CELERY_QUEUE_TAG: os.environ[CELERY_QUEUE_ENV]}

    @dg.job(
        name="celery_learning_batches",
        executor_def=celery_executor(Orchestration(executor="celery", celery_broker_from_env=True)),
        resource_defs=lab_resources(os.environ["PRME_STORE_URL"]),
    )
    def two_batches():
        learn_partitions.alias("batch_a").tag(queue)()
        learn_partitions.alias("batch_b").tag(queue)()

    return two_batches
