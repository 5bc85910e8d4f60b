"""The Dagster tests' shared lab: one store URL and one instance with the lab's partition."""

import dagster as dg
import pytest

from prme_assets.partitions import LEARNING_TARGETS, encode_target
from tests.learning_lab import LAB_OWNER, LAB_SCOPES

LAB_PARTITION = encode_target(LAB_OWNER, LAB_SCOPES)


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
