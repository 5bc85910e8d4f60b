"""The power study's plan arguments: a count of seeds per cell, or a range that extends an earlier
run with seeds it did not draw (the δ = 0 extension in ``benchmarks/results/power/``)."""

from __future__ import annotations

import pytest

from benchmarks.power_study import main, parse_cells


def test_a_count_plans_seeds_from_zero_and_a_range_plans_exactly_its_seeds() -> None:
    assert parse_cells("0.03:400:2") == [(0.03, 400, 0), (0.03, 400, 1)]
    assert parse_cells("0.0:100:20-22,0.0:1600:6-6") == [
        (0.0, 100, 20),
        (0.0, 100, 21),
        (0.0, 100, 22),
        (0.0, 1600, 6),
    ]


@pytest.mark.parametrize("spec", ["0.0:100:9-3", "0.0:100:0"])
def test_an_empty_seed_range_is_refused_naming_the_cell(spec: str) -> None:
    with pytest.raises(SystemExit, match=spec.rsplit(":", 1)[1]):
        parse_cells(spec)


def test_a_results_name_that_is_not_a_plain_file_stem_is_refused_before_any_season_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--cells", "0.0:100:1", "--results-name", "../elsewhere", "--analyze-only"])
    assert exit_info.value.code == 2
    assert "--results-name '../elsewhere'" in capsys.readouterr().err
