"""The HTTP load benchmark, run small: both arms complete with zero errors and it prints the
p50 ratio (the figures themselves are the benchmark's to report, never asserted here)."""

from benchmarks import http


def test_the_http_benchmark_runs_both_arms_without_errors(capsys):
    assert http.main(["--memories", "300", "--clients", "2", "--requests", "6"]) == 0
    out = capsys.readouterr().out
    assert "in-process: 12 requests" in out and "HTTP: 12 requests" in out
    assert out.count(", 0 errors") == 2 and "HTTP p50 / in-process p50 (all requests)" in out
