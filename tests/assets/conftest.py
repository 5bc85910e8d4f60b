"""The Dagster tests' shared lab: one store URL and one instance with the lab's partition."""

import dagster as dg
import pytest

from prme_assets.partitions import LEARNING_TARGETS
from tests.lab_runs import LAB_PARTITION


@pytest.fixture
def lab_url(tmp_path):
    """A fresh embedded store for the planted-signal lab (``tests.learning_lab.make_lab``)."""
    return f"duckdb:///{tmp_path / 'store.duckdb'}"


@pytest.fixture
def instance():
    """A temporary Dagster instance that already knows the lab's partition."""
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions(LEARNING_TARGETS.name, [LAB_PARTITION])
        yield inst
