"""The Dagster code location loads, and the workspace file points at it."""

from pathlib import Path

import dagster as dg
import yaml

from prme_assets.definitions import defs

ROOT = Path(__file__).resolve().parents[1]


def test_definitions_are_loadable():
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_job_def("locomo_demo_job") is not None


def test_workspace_yaml_loads_the_definitions_module():
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    entry = workspace["load_from"][0]["python_module"]
    assert entry["module_name"] == "prme_assets.definitions"
    assert entry["attribute"] == "defs"


def test_prme_core_never_imports_dagster():
    offenders = [
        str(p.relative_to(ROOT)) for p in (ROOT / "prme_core").rglob("*.py")
        if any(line.lstrip().startswith(("import dagster", "from dagster")) for line in p.read_text().splitlines())
    ]
    assert offenders == []
