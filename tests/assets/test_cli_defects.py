"""``prme serve`` and ``prme main`` as adversarial probes met them (issue 29): a port out of range
or in use, a mistyped PostgreSQL port, an operator's own ``dagster.yaml``. Each case is one line
on stderr and an exit code, and an existing instance configuration is never replaced. Runs
``prme`` as a subprocess; every run here fails fast, before any learning starts."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from prme_assets.cli import DEFAULT_INSTANCE_CONFIG, STORE_MARKER

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
_BIN = shutil.which("prme", path=str(Path(sys.executable).parent))
PRME = [_BIN] if _BIN else [sys.executable, "-m", "prme_assets.cli"]
OPERATOR_CONFIG = b"# the operator's instance, hand-written (probe 7f3a)\ntelemetry:\n  enabled: false\n"


def prme(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "PRME_STORE_URL", "PRME_DEBUG")}
    return subprocess.run(
        [*PRME, *args], cwd=cwd, env={**base, **env}, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def listening() -> Iterator[int]:
    """A port on 127.0.0.1 that a socket of this test listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def silent_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    """A one-conversation LoCoMo-format file: valid, so ``prme main`` gets past its data check."""
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 1 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "We talked about the kayak"}],
    }
    qa = [{"question": "What did we talk about?", "answer": "kayak", "evidence": ["D1:1"], "category": 1}]
    path = tmp_path / "mini-locomo.json"
    path.write_text(json.dumps([{"sample_id": "mini", "conversation": conversation, "qa": qa}]), "utf-8")
    return path


# --- prme serve --port ---------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["99999", "0", "-1", "eighty"])
def test_serve_port_out_of_range_is_one_argparse_error_naming_the_bound(tmp_path, port):
    result = prme("serve", "--port", port, "--store", f"duckdb:///{tmp_path / 'x.duckdb'}", cwd=tmp_path)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("prme serve: error: argument --port: ") and "1–65535" in last, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "x.duckdb").exists()  # refused before the store was opened


def test_serve_on_a_port_in_use_says_which_port_in_one_line(tmp_path, listening):
    result = prme("serve", "--port", str(listening), "--store", f"duckdb:///{tmp_path / 'x.duckdb'}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"prme: port {listening} on 127.0.0.1 is in use (another server listens there); "
        "stop that server or pass another --port"
    )
    assert not (tmp_path / "x.duckdb").exists()  # refused before the store was opened


# --- a mistyped PostgreSQL port --------------------------------------------------------------------


def test_store_url_at_a_silent_port_says_unreachable_not_reset(tmp_path, data_file, silent_port):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes(OPERATOR_CONFIG)
    (home / "history").mkdir()
    (home / STORE_MARKER).write_text(json.dumps({"store": "postgresql://127.0.0.1:5432/prme?prme_schema=public"}))
    url = f"postgresql://postgres@127.0.0.1:{silent_port}/prme"
    for extra in ((), ("--reset",)):
        result = prme(
            "main", "--data", str(data_file), *extra, cwd=tmp_path, DAGSTER_HOME=str(home), PRME_STORE_URL=url
        )
        assert result.returncode == 1, result.stderr
        line = result.stderr.strip()
        assert line == (
            f"prme: the PostgreSQL server is unreachable at 127.0.0.1:{silent_port} (the store URL from "
            "PRME_STORE_URL): Connection refused; check the host and port in it and that PostgreSQL runs "
            "there and accepts TCP connections"
        )
        assert "--reset" not in line
    assert (home / "history").is_dir() and (home / STORE_MARKER).is_file()  # --reset cleared nothing


def test_instance_storage_at_a_silent_port_says_unreachable_and_keeps_the_config(tmp_path, data_file, silent_port):
    home = tmp_path / "home"
    home.mkdir()
    config = (
        "# the operator's PostgreSQL instance (probe 7f3a)\n"
        f"storage:\n  postgres:\n    postgres_url: postgresql://postgres@127.0.0.1:{silent_port}/dagster\n"
    ).encode()
    (home / "dagster.yaml").write_bytes(config)
    store = f"duckdb:///{tmp_path / 'store.duckdb'}"
    result = prme("main", "--data", str(data_file), cwd=tmp_path, DAGSTER_HOME=str(home), PRME_STORE_URL=store)
    assert result.returncode == 1, result.stderr
    line = result.stderr.strip()
    assert line.startswith(f"prme: the PostgreSQL server is unreachable at 127.0.0.1:{silent_port} ")
    assert str(home / "dagster.yaml") in line and "--reset" not in line
    assert (home / "dagster.yaml").read_bytes() == config


# --- the instance's dagster.yaml ------------------------------------------------------------------


def test_an_existing_dagster_yaml_is_never_replaced(tmp_path, data_file):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes(OPERATOR_CONFIG)
    (home / STORE_MARKER).write_text(json.dumps({"store": "duckdb:/elsewhere/other.duckdb"}))
    store = f"duckdb:///{tmp_path / 'store.duckdb'}"
    result = prme("main", "--data", str(data_file), cwd=tmp_path, DAGSTER_HOME=str(home), PRME_STORE_URL=store)
    assert result.returncode == 2 and "holds the runs and partitions of the store" in result.stderr
    assert (home / "dagster.yaml").read_bytes() == OPERATOR_CONFIG


def test_a_home_without_dagster_yaml_gets_the_packaged_default(tmp_path, data_file, silent_port):
    home = tmp_path / "fresh"
    url = f"postgresql://postgres@127.0.0.1:{silent_port}/prme"  # fails when the store is opened, after the home
    result = prme("main", "--data", str(data_file), cwd=tmp_path, DAGSTER_HOME=str(home), PRME_STORE_URL=url)
    assert result.returncode == 1 and "Connection refused" in result.stderr
    packaged = files("prme_assets").joinpath(DEFAULT_INSTANCE_CONFIG).read_bytes()
    assert (home / "dagster.yaml").read_bytes() == packaged


def test_the_packaged_default_is_the_repository_dagster_yaml():
    packaged = yaml.safe_load(files("prme_assets").joinpath(DEFAULT_INSTANCE_CONFIG).read_text("utf-8"))
    assert packaged == yaml.safe_load((ROOT / "dagster.yaml").read_text("utf-8"))
