"""The scale benchmark's own pieces (the benchmark itself needs a daemon and minutes: its results
are committed, never timed in tests): the owner mix, the sample, the results table and growth
lines, and the CLI entry."""

import subprocess
import sys
from pathlib import Path

from benchmarks.scale import EXPECTED_STOP, KINDS, render, stratified_sample

ROOT = Path(__file__).resolve().parents[2]


def _result(owners: int, wall: float, dagster_mb: float) -> dict:
    return {
        "owners": owners,
        "executor": "celery",
        "store": "postgres",
        "workers": 2,
        "batch_size": 50,
        "max_concurrent_runs": 2,
        "generation_seconds": 1.0,
        "discovery_seconds": 1.0,
        "learning_wall_seconds": wall,
        "partitions_per_hour": round(owners / wall * 3600),
        "batch_runs": owners // 50,
        "batch_run_seconds_mean": 100.0,
        "batch_run_seconds_max": 110.0,
        "peak_rss_total_mb": 2000,
        "peak_rss_single_process_mb": 300,
        "database_bytes": {"store": 2**20 * owners, "dagster": 2**20 * dagster_mb},
        "audit": {"lost": [], "duplicated": ["x::personal"]},
        "decisions_as_planted": owners,
        "decision_equality": {"identical": 9, "sample": 10},
        "single_run_seconds_mean": 10.0,
        "load_average_start": [1.0, 1.0, 1.0],
        "load_average_after_learning": [2.0, 2.0, 2.0],
        "decisions_by_kind": {"learns": {"activate": owners * 2 // 5}},
    }


def test_the_owner_mix_plants_two_activating_owners_in_five_and_one_failing_gate_for_the_rest():
    assert KINDS.count("learns") == 2 and len(KINDS) == 5
    assert EXPECTED_STOP == {
        "learns": "",
        "mixed": "offline_gate_passed",
        "misleading": "holdout_gate_passed",
        "sparse": "coverage_sufficient",
    }


def test_the_decision_sample_covers_every_kind_without_repeats():
    partitions = [f"owner-{i:05d}::personal" for i in range(50)]
    kind_of = {p: KINDS[i % len(KINDS)] for i, p in enumerate(partitions)}
    sample = stratified_sample(partitions, kind_of, 8)
    assert len(set(sample)) == 8 and {kind_of[p] for p in sample} == set(KINDS)


def test_the_results_table_shows_every_run_and_the_growth_between_sizes():
    text = render({"b": _result(1000, 1000.0, 40), "a": _result(100, 100.0, 10)})
    header = next(line for line in text.splitlines() if line.startswith("| |"))
    assert header == "| | a | b |"  # ordered by size
    assert "| lost / duplicated partitions | 0 / 1 | 0 / 1 |" in text
    assert "| decision equality (batch vs alone) | 9 of 10 | 9 of 10 |" in text
    assert "100 → 1000 owners (×10): learning wall time ×10.00, Dagster DB ×4.00" in text


def test_the_cli_runs_the_benchmark_from_a_checkout_and_answers_help():
    done = subprocess.run(
        [sys.executable, "-m", "prme_assets.cli", "scale-benchmark", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "--owners" in done.stdout and "--executor" in done.stdout and "prme scale-benchmark" in done.stdout
