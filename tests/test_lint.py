"""Lint and format: ``ruff check`` and ``ruff format --check`` (configured in pyproject.toml) run
with every pytest run, so CI checks them too."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> str:
    command = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert command is not None, "ruff is missing: install the test extra (pip install -e '.[test]')"
    return command


@pytest.mark.parametrize(
    "arguments", [["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]], ids=["check", "format"]
)
def test_ruff_finds_nothing_to_change(arguments):
    result = subprocess.run([_ruff(), *arguments], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
