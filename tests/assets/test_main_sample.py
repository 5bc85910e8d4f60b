"""``prme main`` with no data runs anywhere on the generated sample and reaches both an activated
profile and the gates' expected "no"s; ``prme status`` then reads the same store and instance
without the UI. One ``prme main`` run (a subprocess, outside the checkout, with a fresh
DAGSTER_HOME and DuckDB store) serves the whole module."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from prme_core import MemoryClient
from prme_core.datasets.sample import SAMPLE_OWNERS, SAMPLE_SCOPE, owner_topics, sample_size
from tests.assets.test_operator_cli import PRME

pytestmark = [pytest.mark.server, pytest.mark.slow]  # runs the prme command (tests/tiers.py)

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[")


def _env(home: Path, store: Path) -> dict[str, str]:
    drop = ("DAGSTER_HOME", "PRME_STORE_URL", "PRME_DEBUG", "PRME_LOCOMO_PATH", "PRME_PROGRESS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(DAGSTER_HOME=str(home), PRME_STORE_URL=f"duckdb:///{store}")
    return env


def _rows(table: str) -> dict[str, list[str]]:
    """Table rows by partition (cells stripped)."""
    rows = {}
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("| partition"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0]] = cells
    return rows


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("anywhere")
    assert ROOT not in work.parents
    home, store = work / "dagster-home", work / "store" / "sample.duckdb"
    env = _env(home, store)
    result = subprocess.run(
        [*PRME, "main"], cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    return work, env, store, result


def test_main_without_data_learns_on_the_sample_from_any_directory(sample_run):
    _, _, _, result = sample_run
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    assert set(rows) == {f"{o.owner}::{SAMPLE_SCOPE}" for o in SAMPLE_OWNERS}
    outcomes = {p: cells[1] for p, cells in rows.items()}
    assert sum(o == "activated" for o in outcomes.values()) >= 1, result.stdout
    assert sum(o == "not activated" for o in outcomes.values()) >= 1, result.stdout
    assert outcomes["ada::personal"] == "activated"
    assert rows["ben::personal"][2] == "coverage gate refused: insufficient_data"
    assert rows["ben::personal"][5].startswith("needs about ")
    assert rows["cyd::personal"][2] == "offline gate refused: no_improvement"
    assert "3 learning targets; 1 with an active profile." in result.stdout


def test_main_progress_stays_off_when_stderr_is_not_a_terminal(sample_run):
    _, _, _, result = sample_run
    assert not ANSI.search(result.stderr) and not ANSI.search(result.stdout)
    assert "1/4 loading memories and judging real retrievals from the generated sample" in result.stderr


def test_sample_is_stored_once_with_deterministic_ids(sample_run):
    _, _, store, _ = sample_run
    with MemoryClient(f"duckdb:///{store}") as client:
        for owner in SAMPLE_OWNERS:
            assert sum(1 for _ in client.iterate(owner.owner, page_size=1000)) == 2 * owner.topics
            assert len(client.list_relevance(owner.owner, limit=1000)) == owner.topics
            assert len(client.list_holdout_queries(owner.owner, [SAMPLE_SCOPE])) == owner.topics
    assert sample_size() == sum(o.topics for o in SAMPLE_OWNERS)
    assert owner_topics(SAMPLE_OWNERS[0]) == owner_topics(SAMPLE_OWNERS[0])
    assert owner_topics(SAMPLE_OWNERS[0], seed=1) != owner_topics(SAMPLE_OWNERS[0])


def test_status_prints_active_profile_last_decision_and_what_would_change_it(sample_run):
    work, env, store, main = sample_run
    assert main.returncode == 0, main.stderr
    result = subprocess.run(
        [*PRME, "status"], cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    with MemoryClient(f"duckdb:///{store}") as client:
        active = client.get_active_ranking_profile("ada", [SAMPLE_SCOPE])
    ada, ben, cyd = rows["ada::personal"], rows["ben::personal"], rows["cyd::personal"]
    assert ada[1] == str(active.profile_id) and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", ada[2])
    assert ada[3] == "passed: improved_full_retrieval" and re.fullmatch(
        r"\+0\.\d{4} \[\+0\.\d{4}, \+0\.\d{4}\]", ada[4]
    )
    assert ada[6] == "a newer profile that beats this one on the holdout"
    assert ben[1] == "none" and ben[3] == "no: coverage gate refused: insufficient_data"
    assert ben[6].startswith("needs about ") and "more judged queries" in ben[6]
    assert cyd[1] == "none" and cyd[3] == "no: offline gate refused: no_improvement" and cyd[6] == "no measurable gain"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", row[5]) for row in (ada, ben, cyd))
    assert result.stdout.rstrip().endswith("3 learning targets; 1 with an active profile.")


def test_status_without_an_instance_is_bad_input_in_one_line(tmp_path):
    env = _env(tmp_path / "no-home", tmp_path / "none.duckdb")
    result = subprocess.run(
        [*PRME, "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"prme: DAGSTER_HOME: no Dagster instance at {tmp_path / 'no-home'} (DAGSTER_HOME); "
        "run prme main first, or set DAGSTER_HOME"
    )
    assert not (tmp_path / "none.duckdb").exists()


def test_status_refuses_a_store_the_instance_does_not_serve(sample_run, tmp_path):
    work, env, _, _ = sample_run
    other = {**env, "PRME_STORE_URL": f"duckdb:///{tmp_path / 'other.duckdb'}"}
    result = subprocess.run(
        [*PRME, "status"], cwd=work, env=other, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "holds the runs of the store" in result.stderr and "other.duckdb" in result.stderr


def test_progress_is_shown_when_forced_and_off_otherwise(monkeypatch, capsys):
    from prme_assets.demo.progress import PROGRESS_ENV, Progress, wanted

    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert not wanted()  # pytest's stderr is no terminal
    assert wanted(forced=True)
    monkeypatch.setenv(PROGRESS_ENV, "1")
    assert wanted()
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert not wanted()
    with Progress(True) as progress:
        advance = progress.task("judging", total=2)
        advance(description="judging ada")
        advance()
        assert progress.say("a line")
    err = capsys.readouterr().err
    assert "judging ada" in err and "2/2" in err and "a line" in err
    off = Progress(False)
    assert not off.say("x") and off.task("t", 1)() is None


def test_main_and_status_on_a_postgresql_store(postgres_url, tmp_path):
    env = {**_env(tmp_path / "home", tmp_path / "unused.duckdb"), "PRME_STORE_URL": postgres_url}
    main = subprocess.run([*PRME, "main"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert main.returncode == 0, main.stderr
    assert _rows(main.stdout)["ada::personal"][1] == "activated"
    status = subprocess.run([*PRME, "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    rows = _rows(status.stdout)
    assert rows["ada::personal"][3] == "passed: improved_full_retrieval" and rows["ada::personal"][1] != "none"
    assert rows["ben::personal"][3] == "no: coverage gate refused: insufficient_data"
    assert not (tmp_path / "unused.duckdb").exists()
