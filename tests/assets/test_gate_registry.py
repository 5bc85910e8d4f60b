"""One list of gates: every check registered in ``Definitions`` is a gate of ``prme_assets.checks``
and the activation sensor refuses a partition whenever any one of them did not pass."""

import uuid

import dagster as dg
import pytest

from benchmarks.locomo_report import GATE_NAMES
from prme_assets.activation import profile_activation_sensor
from prme_assets.checks import GATE_CHECKS, GATES
from prme_assets.definitions import build_definitions
from prme_assets.partitions import LEARNING_TARGETS, encode_target
from prme_assets.resources import PrmeStoreResource

PARTITION = encode_target("alice", ("personal",))
DEFINED_CHECKS = sorted(
    (k.asset_key.to_user_string(), k.name) for k in build_definitions().resolve_asset_graph().asset_check_keys
)


def test_the_registry_lists_every_gate_once_and_definitions_register_exactly_those_checks():
    registered = [(k.asset_key.to_user_string(), k.name) for gate in GATES for k in gate.check_keys]
    assert list(GATE_CHECKS) == registered and len(set(registered)) == len(registered) == len(GATES)
    assert set(DEFINED_CHECKS) == set(GATE_CHECKS)


def test_the_benchmark_report_records_the_registered_gates_in_pipeline_order():
    assert GATE_NAMES == tuple(name for _, name in GATE_CHECKS)


def _sensor_reason(tmp_path, failing: tuple[str, str] | None) -> str:
    """The sensor's skip reason when the newest candidate profile's checks all passed but ``failing``."""
    store = PrmeStoreResource(store_url=f"duckdb:///{tmp_path / 'store.duckdb'}")
    profile_id = str(uuid.uuid4())
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(LEARNING_TARGETS.name, [PARTITION])
        instance.report_runless_asset_event(
            dg.AssetMaterialization("candidate_profile", partition=PARTITION, metadata={"profile_id": profile_id})
        )
        for asset, name in DEFINED_CHECKS:
            instance.report_runless_asset_event(
                dg.AssetCheckEvaluation(
                    asset_key=dg.AssetKey(asset), check_name=name, passed=(asset, name) != failing, partition=PARTITION
                )
            )
        with dg.build_sensor_context(instance=instance, resources={"prme_store": store}) as context:
            result = profile_activation_sensor(context)
    assert isinstance(result, dg.SkipReason)
    return result.skip_message


@pytest.mark.parametrize("failing", DEFINED_CHECKS, ids=[name for _, name in DEFINED_CHECKS])
def test_the_activation_sensor_refuses_when_any_one_check_in_definitions_failed(tmp_path, failing):
    reason = _sensor_reason(tmp_path, failing)
    assert reason == f"{PARTITION}: gates not passed for the newest candidate profile: {failing[1]}"


def test_the_activation_sensor_looks_past_the_gates_when_every_check_in_definitions_passed(tmp_path):
    reason = _sensor_reason(tmp_path, None)
    assert "gates not passed" not in reason and reason.endswith("is missing from the store")
