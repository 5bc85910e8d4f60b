"""The import contracts in pyproject.toml (``[tool.importlinter]``): layers, no cycles, no Dagster
in prme_core. Running them here makes every pytest run, CI's included, check the architecture."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_lint_imports_keeps_every_import_contract():
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert command is not None, "lint-imports is missing: install the test extra (pip install -e '.[test]')"
    result = subprocess.run([command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
