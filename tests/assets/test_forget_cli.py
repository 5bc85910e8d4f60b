"""`prme forget` and `prme vacuum` from the shell: one memory, a whole owner behind its guard,
the bytes gone from the DuckDB file after the vacuum, one-line errors for what does not exist."""

from __future__ import annotations

import secrets

from prme_core import MemoryClient
from tests.assets.test_operator_cli import first_line, prme


def test_forget_a_memory_then_an_owner_and_vacuum_the_file(tmp_path):
    path = tmp_path / "s.duckdb"
    url = f"duckdb:///{path}"
    secret = "the gate code is " + secrets.token_hex(64)
    with MemoryClient(url) as client:
        doomed = client.store_memory("zed", secret)
        kept = client.store_memory("amy", "amy's note stays")
    deleted = prme("forget", "--owner", "zed", "--memory", str(doomed.id), "--store", url, cwd=tmp_path)
    assert deleted.returncode == 0, deleted.stderr
    assert f"deleted memory {doomed.id} of zed: 1 version(s)" in deleted.stdout and "prme vacuum" in deleted.stdout
    again = prme("forget", "--owner", "zed", "--memory", str(doomed.id), "--store", url, cwd=tmp_path)
    assert again.returncode == 1 and first_line(again) == f"prme: node {doomed.id} does not exist for this owner"

    unguarded = prme("forget", "--owner", "amy", "--store", url, cwd=tmp_path)
    assert unguarded.returncode == 2 and "--confirm amy" in unguarded.stderr
    with MemoryClient(url) as client:
        assert client.get("amy", kept.id) == kept

    vacuumed = prme("vacuum", "--store", url, cwd=tmp_path)
    assert vacuumed.returncode == 0 and vacuumed.stdout.startswith("vacuumed: "), vacuumed.stderr
    assert secret.encode() not in path.read_bytes()

    forgotten = prme("forget", "--owner", "amy", "--confirm", "amy", "--vacuum", "--store", url, cwd=tmp_path)
    assert forgotten.returncode == 0, forgotten.stderr
    assert "forgot owner amy: memory_nodes 1" in forgotten.stdout and "vacuumed: " in forgotten.stdout
    with MemoryClient(url) as client:
        assert client.scan("amy").items == () and [r.kind for r in client.deletion_records("amy")] == ["owner"]
