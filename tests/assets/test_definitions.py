"""The Dagster code locations load (production and the LoCoMo demo), and the workspace files point at them."""

import json
import os
from pathlib import Path

import dagster as dg
import pytest
import yaml

from prme_assets.definitions import defs
from prme_assets.demo.definitions import defs as demo_defs

ROOT = Path(__file__).resolve().parents[2]


def test_definitions_are_loadable():
    dg.Definitions.validate_loadable(defs)
    dg.Definitions.validate_loadable(demo_defs)
    assert demo_defs.resolve_job_def("locomo_demo_job") is not None


def test_production_definitions_hold_no_demo_asset_or_job():
    demo_assets = {k.to_user_string() for k in demo_defs.resolve_asset_graph().get_all_asset_keys()}
    demo_jobs = {j.name for j in demo_defs.resolve_all_job_defs() if not j.name.startswith("__")}
    graph = defs.resolve_asset_graph()
    production_assets = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert demo_assets == {"locomo_memories", "locomo_feedback"} and demo_jobs == {"locomo_demo_job"}
    assert not demo_assets & production_assets
    assert not demo_jobs & {j.name for j in defs.resolve_all_job_defs()}
    assert {graph.get(k).group_name for k in graph.get_all_asset_keys()} == {"prme_learning"}


def test_workspace_yaml_loads_the_definitions_module():
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    entry = workspace["load_from"][0]["python_module"]
    assert entry["module_name"] == "prme_assets.definitions"
    assert entry["attribute"] == "defs"


def test_workspace_yaml_loads_the_demo_as_its_own_code_location_and_deploy_loads_production_only():
    locations = [e["python_module"] for e in yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]]
    assert [(e["module_name"], e["location_name"]) for e in locations] == [
        ("prme_assets.definitions", "prme_learning"),
        ("prme_assets.demo.definitions", "prme_locomo_demo"),
    ]
    deploy = [e["python_module"] for e in yaml.safe_load((ROOT / "deploy" / "workspace.yaml").read_text())["load_from"]]
    assert [(e["module_name"], e["location_name"]) for e in deploy] == [("prme_assets.definitions", "prme_learning")]


def test_prme_core_never_imports_dagster():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "prme_core").rglob("*.py")
        if any(line.lstrip().startswith(("import dagster", "from dagster")) for line in p.read_text().splitlines())
    ]
    assert offenders == []


SNAPSHOT = ROOT / "tests" / "fixtures" / "definitions_snapshot.json"


def definitions_snapshot() -> dict:
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "group": node.group_name,
            "partitions": getattr(node.partitions_def, "name", None),
            "checks": sorted(c.name for c in graph.asset_check_keys if c.asset_key == key),
        }
    checks = {
        f"{c.asset_key.to_user_string()}:{c.name}": {
            "blocking": graph.get_check_spec(c).blocking,
            "partitions": getattr(graph.get_check_spec(c).partitions_def, "name", None),
        }
        for c in sorted(graph.asset_check_keys, key=lambda c: (c.asset_key.to_user_string(), c.name))
    }
    return {
        "assets": assets,
        "checks": checks,
        "jobs": sorted(j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__")),
        "sensors": sorted(s.name for s in defs.sensors or ()),
        "schedules": sorted(s.name for s in defs.schedules or ()),
    }


def test_definitions_match_the_committed_snapshot():
    """Regenerate deliberately with PRME_UPDATE_SNAPSHOTS=1 when the graph changes on purpose."""
    current = definitions_snapshot()
    if os.environ.get("PRME_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    assert current == json.loads(SNAPSHOT.read_text())


def test_both_instance_configurations_validate_with_the_activation_and_learning_tag_limits(tmp_path, monkeypatch):
    import shutil

    from dagster._core.instance.config import dagster_instance_config

    for name in ("DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_HOST", "DAGSTER_PG_DB", "DAGSTER_PG_PORT"):
        monkeypatch.setenv(name, "5432" if name.endswith("PORT") else "x")
    for source in (ROOT / "dagster.yaml", ROOT / "deploy" / "dagster.postgres.yaml"):
        home = tmp_path / source.parent.name
        home.mkdir(exist_ok=True)
        shutil.copyfile(source, home / "dagster.yaml")
        config, _ = dagster_instance_config(str(home))
        limits = {item["key"]: item for item in config["concurrency"]["runs"]["tag_concurrency_limits"]}
        assert limits["prme/activation_target"]["limit"] == 1
        assert limits["prme/activation_target"]["value"] == {"applyLimitPerUniqueValue": True}
        assert "prme/learning_target" in limits
    assert "storage" not in yaml.safe_load((ROOT / "dagster.yaml").read_text())  # local: SQLite under DAGSTER_HOME


def test_dagster_cli_validates_the_workspace(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "PRME_STORE_URL": f"duckdb:///{tmp_path / 's.duckdb'}"}
    done = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "All code locations passed validation" in done.stdout + done.stderr


def test_store_resource_takes_its_embedding_from_the_environment(monkeypatch, tmp_path):
    from prme_assets.resources import store_resource_from_env

    monkeypatch.setenv("PRME_STORE_URL", f"duckdb:///{tmp_path / 'e.duckdb'}")
    monkeypatch.delenv("PRME_EMBEDDING", raising=False)
    resource = store_resource_from_env()
    assert resource.embedding == "hashed"
    with resource.client() as client:
        assert client.pipeline.embedder.identity()["provider"] == "prme.hashed"
    monkeypatch.setenv("PRME_EMBEDDING", "word2vec")
    with pytest.raises(Exception, match="embedding"):
        store_resource_from_env()


def test_runs_from_the_ui_fork_their_steps_from_a_preloaded_server():
    job = defs.resolve_job_def("prme_learning_job")
    assert job.executor_def.name == "prme_multiprocess"
    resolved = job.executor_def.apply_config_mapping({})  # the configured executor with no run config
    assert resolved.success
    assert resolved.value["config"]["start_method"] == {"forkserver": {"preload_modules": ["prme_assets.definitions"]}}
