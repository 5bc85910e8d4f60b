"""``prme keys`` (issue 18): create prints the key on its last line, list shows states, revoke
appends a record; bad input exits 2 with one line naming the value. (``prme serve`` runs in
tests/bench/test_http_benchmark.py, ``prme mcp`` in tests/api/test_mcp.py.)"""

import pytest

from prme_assets import cli
from prme_core.engine import MemoryClient
from prme_core.errors import Unauthenticated


def test_keys_create_prints_the_key_last_and_list_and_revoke_follow(store_url, capsys):
    assert (
        cli.main(["keys", "create", "--owner", "alice", "--scopes", "personal", "project", "--store", store_url]) == 0
    )
    key = capsys.readouterr().out.strip().splitlines()[-1]
    with MemoryClient(store_url) as client:
        principal = client.authenticate(key)
    assert (principal.owner, principal.scopes) == ("alice", ("personal", "project"))
    assert cli.main(["keys", "list", "--store", store_url]) == 0
    listing = capsys.readouterr().out
    assert principal.key_id in listing and "active" in listing and key not in listing
    assert cli.main(["keys", "revoke", principal.key_id, "--store", store_url]) == 0
    assert "revoked" in capsys.readouterr().out
    with MemoryClient(store_url) as client, pytest.raises(Unauthenticated):
        client.authenticate(key)
    assert cli.main(["keys", "list", "--owner", "alice", "--store", store_url]) == 0
    assert "revoked" in capsys.readouterr().out


@pytest.mark.parametrize(
    "arguments, says",
    [
        (["create", "--owner", "alice", "--scopes", "galaxy"], "unknown scope 'galaxy'"),
        (["create", "--owner", "alice", "--expires", "2030-01-01"], "has no timezone"),
        (["create", "--owner", "alice", "--expires", "soon"], "neither a duration"),
        (["revoke", "f" * 24], "no API key"),
    ],
)
def test_bad_key_arguments_exit_2_with_one_line(tmp_path, capsys, arguments, says):
    url = f"duckdb:///{tmp_path / 'keys.duckdb'}"
    assert cli.main(["keys", *arguments, "--store", url]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_expires_takes_a_duration(tmp_path, capsys):
    url = f"duckdb:///{tmp_path / 'keys.duckdb'}"
    assert cli.main(["keys", "create", "--owner", "alice", "--expires", "12h", "--store", url]) == 0
    with MemoryClient(url) as client:
        (status,) = client.list_api_keys("alice")
    hours = (status.key.expires_at - status.key.created_at).total_seconds() / 3600
    assert 11.99 < hours <= 12.0


def test_keys_create_records_the_role_and_list_shows_it(tmp_path, capsys):
    url = f"duckdb:///{tmp_path / 'keys.duckdb'}"
    assert cli.main(["keys", "create", "--owner", "alice", "--role", "operator", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "role:    operator" in out
    with MemoryClient(url) as client:
        assert client.authenticate(out.strip().splitlines()[-1]).role == "operator"
    assert cli.main(["keys", "list", "--store", url]) == 0
    assert "operator" in capsys.readouterr().out


def test_key_commands_on_a_duckdb_file_another_process_holds_fail_fast_naming_it_and_the_route(tmp_path):
    """A server keeps its DuckDB file while it runs: ``prme keys`` says so within a few seconds,
    names the holding process and points at the key routes (not the 60 s default wait)."""
    import subprocess
    import sys
    import time

    path = tmp_path / "held.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from prme_core.engine import MemoryClient; "
            f"c = MemoryClient('duckdb:///{path}'); print('ready', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "prme_assets.cli",
                "keys",
                "create",
                "--owner",
                "alice",
                "--store",
                f"duckdb:///{path}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        elapsed = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode != 0
    err = done.stderr.strip()
    assert f"process {holder.pid}" in err and "POST/GET /v1/keys" in err, err
    assert elapsed < 20, elapsed  # the lock wait is 2 s; the rest is starting Python
