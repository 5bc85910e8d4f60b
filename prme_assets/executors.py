"""The executors of the production code location: how the steps of a run are executed.

- ``prme_multiprocess`` (default): each step in a process forked from a server that has already
  imported this code location.
- ``prme_celery`` (``PRME_EXECUTOR=celery``): each step is a task on a Celery broker (RabbitMQ
  by default, as ``dagster-celery``), executed by whichever worker takes it; workers run
  ``celery -A dagster_celery.app -b <broker> worker -Q dagster`` with the same code and
  environment (``PRME_STORE_URL`` on PostgreSQL, the Dagster instance on PostgreSQL).

On Kubernetes, ``dagster_k8s.k8s_job_executor`` takes the same place (README, "Production").
"""

import dagster as dg

from prme_assets.resources import CELERY_BROKER_ENV, Orchestration

FORKSERVER_START = {"forkserver": {"preload_modules": ["prme_assets.definitions"]}}
"""Step processes fork from a server that has already imported this code location. A learning
run has twelve steps (five stages, seven gates); spawning each one fresh re-imports Dagster and
``prme_core`` (about 3.5 s a step on 2 cores), forking from the preloaded server does not."""
MULTIPROCESS_EXECUTOR = dg.multiprocess_executor.configured(
    {"start_method": FORKSERVER_START}, name="prme_multiprocess"
)
DEFAULT_CELERY_BROKER = "pyamqp://guest@localhost:5672//"
"""``dagster-celery``'s own default: the local RabbitMQ."""


def celery_config(orchestration: Orchestration) -> dict:
    """The Celery executor's config: the broker as its environment variable when set (resolved at
    launch, so no password enters a definition or run), else the local RabbitMQ."""
    broker = {"env": CELERY_BROKER_ENV} if orchestration.celery_broker_from_env else DEFAULT_CELERY_BROKER
    return {"broker": broker, "backend": orchestration.celery_backend}


def celery_executor(orchestration: Orchestration) -> dg.ExecutorDefinition:
    """``dagster_celery.celery_executor`` on the configured broker (imported only when chosen)."""
    from dagster_celery import celery_executor as base

    return base.configured(celery_config(orchestration), name="prme_celery")


def executor_for(orchestration: Orchestration) -> dg.ExecutorDefinition:
    return celery_executor(orchestration) if orchestration.executor == "celery" else MULTIPROCESS_EXECUTOR
