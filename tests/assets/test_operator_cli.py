"""The ``prme`` command as an operator meets it: inputs checked before work, one line and an exit
code per failure (2 bad input, 1 failed, 130 stopped), Ctrl-C that stops within seconds and a
rerun that duplicates nothing. Runs ``prme`` as a subprocess on a small generated LoCoMo-format
file (two short conversations), so it needs no data from outside the repository."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from prme_core import MemoryClient
from prme_core.datasets.locomo import read_locomo, split_questions
from tests.conftest import _postgres_dsn

WORDS = [
    "kayak",
    "lantern",
    "meadow",
    "quartz",
    "harbor",
    "violin",
    "saffron",
    "glacier",
    "orchard",
    "falcon",
    "cobalt",
    "tundra",
    "pepper",
    "marble",
    "canyon",
    "ember",
    "willow",
    "bison",
]
_BIN = shutil.which("prme", path=str(Path(sys.executable).parent))
PRME = [_BIN] if _BIN else [sys.executable, "-m", "prme_assets.cli"]


def _conversation(sample_id: str, sessions: int = 3, turns: int = 6) -> dict:
    """A LoCoMo-format conversation: each turn mentions one word; each question asks about one turn."""
    conv: dict = {"speaker_a": "Ann", "speaker_b": "Bob"}
    qa = []
    for s in range(1, sessions + 1):
        conv[f"session_{s}_date_time"] = f"1:56 pm on {s} May, 2023"
        conv[f"session_{s}"] = []
        for t in range(1, turns + 1):
            word = WORDS[(s * turns + t) % len(WORDS)]
            conv[f"session_{s}"].append(
                {
                    "speaker": "Ann" if t % 2 else "Bob",
                    "dia_id": f"D{s}:{t}",
                    "text": f"In session {s} we talked about the {word} number {t}",
                }
            )
            qa.append(
                {
                    "question": f"What did we say about the {word} number {t} in session {s}?",
                    "answer": word,
                    "evidence": [f"D{s}:{t}"],
                    "category": 1,
                }
            )
    return {"sample_id": sample_id, "conversation": conv, "qa": qa}


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "mini-locomo.json"
    path.write_text(json.dumps([_conversation("mini-a"), _conversation("mini-b")]), "utf-8")
    return path


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "PRME_STORE_URL", "PRME_DEBUG")}
    env.update(extra)
    return env


def prme(*args: str, cwd: Path, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PRME, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=timeout, check=False
    )


def first_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    return lines[0] if lines else ""


def _counts(store_url: str, data: Path) -> dict[str, tuple[int, int, int]]:
    """(memories, relevance records, holdout queries) per owner, and what the data file implies."""
    out = {}
    with MemoryClient(store_url) as client:
        for conv in read_locomo(data):
            owner = conv.sample_id
            memories = sum(1 for _ in client.iterate(owner, page_size=1000))
            records = len(client.list_relevance(owner, limit=1000))
            holdouts = len(client.list_holdout_queries(owner, ["personal"]))
            out[owner] = (memories, records, holdouts)
    return out


def _expected(data: Path) -> dict[str, tuple[int, int, int]]:
    expected = {}
    for conv in read_locomo(data):
        split = split_questions(conv)
        expected[conv.sample_id] = (len(conv.turns), len(split.feedback), len(split.holdout))
    return expected


# --- help and version -------------------------------------------------------------------------


def test_help_is_plain_text_and_loads_neither_dagster_nor_the_engine(workdir):
    started = time.perf_counter()
    result = prme("--help", cwd=workdir)
    assert result.returncode == 0
    assert "exit codes:" in result.stdout and "prme main" not in result.stderr
    assert "``" not in result.stdout and ":class:" not in result.stdout
    code = (
        "import sys, prme_assets.cli as c; c.build_parser(); "
        "print(sorted(m for m in ('dagster', 'prme_core.engine', 'numpy') if m in sys.modules))"
    )
    probe = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=workdir, timeout=60, check=False
    )
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr
    assert time.perf_counter() - started < 10


def test_version_names_the_package_version(workdir):
    result = prme("--version", cwd=workdir)
    assert result.returncode == 0 and result.stdout.strip().startswith("prme 0.")


# --- inputs checked before work ---------------------------------------------------------------


def test_unsupported_store_scheme_is_bad_input_in_one_line(workdir, data_file):
    result = prme("main", "--data", str(data_file), "--store", "mysql://root:secret@db/prme", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert first_line(result).startswith(
        "prme: store URL 'mysql://root:***@db/prme' (from --store): unsupported scheme"
    )
    assert "secret" not in result.stderr
    assert not (workdir / ".prme").exists() and not (workdir / ".dagster_home").exists()


def test_store_url_from_the_environment_is_named_as_such(workdir, data_file):
    result = prme("main", "--data", str(data_file), cwd=workdir, PRME_STORE_URL="sqlite:///x.db")
    assert result.returncode == 2
    assert first_line(result).startswith("prme: store URL 'sqlite:///x.db' (from PRME_STORE_URL)")


def test_missing_data_file_names_the_path(workdir):
    missing = workdir / "nowhere" / "locomo.json"
    result = prme("main", "--data", str(missing), cwd=workdir)
    assert result.returncode == 2
    assert first_line(result) == (
        f"prme: data: no LoCoMo-format JSON file at {missing}; pass the file's path "
        "(prme main --data PATH) or set PRME_LOCOMO_PATH"
    )


@pytest.mark.parametrize(
    "content, says",
    [
        ('[{"sample_id": "x", ', "is not JSON"),
        ('{"not": "a list"}', "must hold a JSON list of conversations"),
        (
            (
                '[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", '
                '"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [{"speaker": "A"}]}}]'
            ),
            "KeyError 'dia_id'",
        ),
    ],
)
def test_malformed_data_file_names_its_path(workdir, content, says):
    bad = workdir / "broken.json"
    bad.write_text(content, "utf-8")
    result = prme("main", "--data", str(bad), cwd=workdir)
    assert result.returncode == 2
    assert first_line(result).startswith("prme: ") and str(bad) in first_line(result) and says in first_line(result)
    assert "Traceback" not in result.stderr


def test_unknown_conversation_id_is_bad_input(workdir, data_file):
    result = prme("main", "--data", str(data_file), "--conversation", "mini-z", cwd=workdir)
    assert result.returncode == 2
    assert first_line(result).startswith("prme: conversations: unknown sample ids ['mini-z']")


def test_debug_adds_the_traceback_before_the_line(workdir, data_file):
    result = prme("--debug", "main", "--data", str(data_file), "--store", "mysql://x/y", cwd=workdir)
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("prme: store URL 'mysql://x/y'")
    again = prme("main", "--data", str(data_file), "--store", "mysql://x/y", cwd=workdir, PRME_DEBUG="1")
    assert "Traceback" in again.stderr


def test_locked_duckdb_store_fails_in_one_line_naming_the_file(workdir, data_file):
    path = workdir / "held.duckdb"
    hold = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); time.sleep(120)"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.perf_counter()
        result = prme("main", "--data", str(data_file), cwd=workdir, PRME_STORE_URL=f"duckdb:///{path}?lock_timeout=1")
        elapsed = time.perf_counter() - started
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    line = first_line(result)
    assert line.startswith(f"prme: cannot open DuckDB file '{path}'") and "Another process holds it" in line
    assert "waited 1s" in line and elapsed < 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_postgresql_fails_fast_with_the_cause(workdir, data_file):
    port = _free_port()
    started = time.perf_counter()
    result = prme(
        "main", "--data", str(data_file), "--store", f"postgresql://postgres@127.0.0.1:{port}/prme", cwd=workdir
    )
    elapsed = time.perf_counter() - started
    assert result.returncode == 1
    line = first_line(result)
    assert line.startswith(
        f"prme: cannot connect to PostgreSQL (host 127.0.0.1, port {port}, database prme, user postgres;"
    )
    assert "Connection refused" in line and result.stderr.strip().count("\n") == 0
    assert elapsed < 8  # the pool alone used to wait 10 s and say "pool initialization incomplete"


def test_unknown_postgresql_database_names_the_server_message(workdir, data_file):
    parts = urlsplit(_postgres_dsn())
    url = urlunsplit((parts.scheme, parts.netloc, "/prme_no_such_database", "", ""))
    started = time.perf_counter()
    result = prme("main", "--data", str(data_file), "--store", url, cwd=workdir)
    assert result.returncode == 1
    assert 'database "prme_no_such_database" does not exist' in first_line(result)
    assert time.perf_counter() - started < 8


def test_instance_of_another_store_is_refused_until_reset(workdir, data_file):
    from prme_assets.cli import STORE_MARKER, check_instance_store

    home = workdir / ".dagster_home"
    (home / "history").mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", "utf-8")
    (home / STORE_MARKER).write_text(json.dumps({"store": "duckdb:/elsewhere/other.duckdb"}), "utf-8")
    result = prme("main", "--data", str(data_file), cwd=workdir)
    assert result.returncode == 2
    assert first_line(result).startswith(
        f"prme: the Dagster instance {home} holds the runs and partitions of the "
        "store duckdb:/elsewhere/other.duckdb, not of duckdb:"
    )
    assert "use another DAGSTER_HOME for this store, or pass --reset" in first_line(result)
    check_instance_store(home, "duckdb:/here.duckdb", reset=True)
    assert not (home / "history").exists() and not (home / STORE_MARKER).exists()
    assert (home / "dagster.yaml").is_file()


# --- runs that fail, runs that are stopped ------------------------------------------------------


def test_failing_learning_run_fails_the_command_naming_the_partition(tmp_path, data_file, monkeypatch, capsys):
    from prme_assets.demo.main_job import LearningRunsFailed, run_main
    from prme_assets.resources import LearningPolicyResource

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PRME_STORE_URL", f"duckdb:///{tmp_path / 'store.duckdb'}")
    (tmp_path / "home").mkdir()
    with pytest.raises(LearningRunsFailed) as raised:  # max_records=1: every snapshot is too large
        run_main(
            data_path=data_file,
            conversations=["mini-a"],
            say=lambda _: None,
            policy=LearningPolicyResource(max_records=1),
        )
    assert str(raised.value).startswith("learning mini-a::personal failed: feedback_snapshot: SnapshotTooLarge:")
    table = capsys.readouterr().out
    assert "| mini-a::personal | FAILED |" in table and "1 failed." in table


def test_ctrl_c_during_a_duckdb_query_stays_an_interrupt(tmp_path):
    """DuckDB turns a signal handler's exception into RuntimeError("Query interrupted"); the store
    re-raises it as KeyboardInterrupt, so no ``except Exception`` on the way swallows Ctrl-C."""
    from prme_core.storage import open_store

    class Stop(KeyboardInterrupt):
        pass

    def stop(signum, frame):
        raise Stop

    store = open_store(f"duckdb:///{tmp_path / 'q.duckdb'}")
    previous = signal.signal(signal.SIGINT, stop)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt) as raised, store.transaction(read_only=True) as tx:
            tx.conn.fetchall("SELECT count(*) FROM range(1000000000000) a")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
        store.close()
    assert "interrupted" in str(raised.value)


def test_ctrl_c_while_learning_exits_130_in_one_line_and_a_rerun_duplicates_nothing(workdir, data_file):
    process = subprocess.Popen(
        [*PRME, "main", "--data", str(data_file)],
        cwd=workdir,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in process.stderr:
            if line.startswith("3/4 learning "):  # the learning phase has started
                break
        else:
            pytest.fail(f"prme main ended before learning: {process.wait()}")
        sent = time.perf_counter()
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        code = process.wait(timeout=60)
        stopped_after = time.perf_counter() - sent
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 130
    assert stopped_after < 10
    assert rest.splitlines() == [
        (
            "prme: stopped by SIGINT; the run in flight was canceled; rerun prme main to "
            "continue (memories and feedback already loaded are kept and not loaded twice)"
        )
    ]
    assert process.stdout.read() == ""  # no table: nothing was concluded

    store_url = f"duckdb:///{workdir / '.prme' / 'prme.duckdb'}"
    expected = _expected(data_file)
    assert _counts(store_url, data_file) == expected  # the data job finished before learning started

    rerun = prme("main", "--data", str(data_file), cwd=workdir)
    assert rerun.returncode == 0, rerun.stderr
    assert "| mini-a::personal |" in rerun.stdout and "| mini-b::personal |" in rerun.stdout
    assert _counts(store_url, data_file) == expected

    import dagster as dg

    with dg.DagsterInstance.from_config(str(workdir / ".dagster_home")) as instance:
        statuses = {r.status for r in instance.get_runs()}
    assert statuses <= {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.CANCELED}, statuses


def test_outcome_line_and_table_read_decision_gain_interval_reason_and_needs():
    from prme_assets.demo.outcome_table import PartitionResult, render_table

    no = PartitionResult(
        "a::personal",
        "r1",
        {
            "outcome": "expected_no",
            "stopped_by": "offline_gate_passed",
            "decision": "no_improvement",
            "reason": "offline gate: no_improvement",
            "gain": "0.0123",
            "interval_low": "-0.004",
            "interval_high": "0.029",
            "needs": "needs about 240 more judged queries",
        },
    )
    assert no.summary() == (
        "not activated: no_improvement, +0.0123 [-0.0040, +0.0290]; needs about 240 more judged queries"
    )
    yes = PartitionResult(
        "b::personal",
        "r2",
        {
            "outcome": "passed",
            "decision": "improved_full_retrieval",
            "reason": "holdout NDCG gain +0.0300 over 40 groups",
            "gain": "0.03",
            "interval_low": "0.01",
            "interval_high": "0.05",
        },
        activation="activated",
    )
    assert yes.summary() == "activated: improved_full_retrieval, +0.0300 [+0.0100, +0.0500]"
    broken = PartitionResult("c::personal", "r3", {}, error="feedback_snapshot: StoreUnavailable: locked")
    unsound = PartitionResult(
        "d::personal",
        "r4",
        {
            "outcome": "integrity_failure",
            "stopped_by": "baseline_replay_exact",
            "reason": "2 judged candidates do not replay",
        },
    )
    assert unsound.failed and unsound.summary() == (
        "failed: integrity failure at baseline_replay_exact: 2 judged candidates do not replay"
    )
    table = render_table([no, yes, broken, unsound]).splitlines()
    assert table[2] == (
        "| a::personal | not activated | offline gate refused: no_improvement | +0.0123 [-0.0040, "
        "+0.0290] | offline gate: no_improvement (the 95% interval includes 0) | needs about 240 more "
        "judged queries |"
    )
    assert table[3].startswith("| b::personal | activated | improved_full_retrieval | +0.0300 [+0.0100, +0.0500] |")
    assert table[4] == (
        "| c::personal | FAILED | — | — | feedback_snapshot: StoreUnavailable: locked | fix the cause "
        "and rerun prme main |"
    )
    assert table[5].startswith("| d::personal | FAILED (integrity) | baseline replay check failed |")
    assert table[-1] == "4 learning targets; 1 with an active profile; 2 failed."


# --- the benchmark's output ------------------------------------------------------------------------


def test_benchmark_writes_to_scratch_unless_told_to_update_the_committed_results():
    from benchmarks import locomo_learning as bench

    parser = bench.build_parser()
    assert bench.output_dir(parser.parse_args([]), "hashed") == bench.SCRATCH_OUT
    assert bench.output_dir(parser.parse_args(["--out", "x"]), "hashed") == Path("x")
    committed = bench.output_dir(parser.parse_args(["--update-results"]), "hashed")
    assert committed == Path(bench.__file__).resolve().parent / "results" / "locomo"
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "x", "--update-results"])
