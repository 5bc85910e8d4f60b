"""The power study's plan arguments: a count of seeds per cell, or a range that extends an earlier
run with seeds it did not draw (the δ = 0 extension in ``benchmarks/results/power/``)."""

from __future__ import annotations

import pytest

from benchmarks.power_study import (
    Look,
    Season,
    check_disjoint,
    check_neutral,
    check_pool,
    check_same_design,
    check_seasons_config,
    design_config,
    main,
    parse_cells,
    pooled_markdown,
    pooled_null,
)


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


def _null_cell(seasons: int, season_hits: int) -> dict:
    rate = season_hits / seasons
    return {"seasons": seasons, "new": {"single": 0.0, "season": rate}}


def test_pooling_adds_the_null_counts_of_two_runs_without_a_shared_season() -> None:
    earlier = {
        "meta": {"arguments": "--learner shrunk --cells 0.0:100:20,0.03:100:20"},
        "cells": {"0.0:100": _null_cell(20, 0), "0.03:100": _null_cell(20, 10)},
    }
    cells = parse_cells("0.0:100:20-79")
    check_disjoint(cells, earlier, "results.json")
    rows = pooled_null({"cells": {"0.0:100": _null_cell(60, 1)}}, [earlier])
    assert [(r["n"], r["single"], r["season"], r["seasons"]) for r in rows] == [(100, 0, 1, 80)]  # only the null cells
    assert 0.0 < rows[0]["season_upper"] < 0.1
    assert "| 100 | 60 | 20 | 0 of 80 | 1 of 80 |" in pooled_markdown(rows, ["results.json"])


def test_an_extension_run_in_parts_pools_every_part_once() -> None:
    first = {
        "meta": {"arguments": "--learner averse --cells 0.0:100:31", "learner_config": design_config("averse")},
        "cells": {"0.0:100": _null_cell(31, 0), "0.03:100": _null_cell(20, 4)},
    }
    part = {
        "meta": {"arguments": "--learner averse --cells 0.0:100:31-70", "learner_config": design_config("averse")},
        "cells": {"0.0:100": _null_cell(40, 1)},
    }
    cells = parse_cells("0.0:100:71-124")
    check_pool(cells, [("averse.json", first), ("part-1.json", part)], "averse")
    rows = pooled_null({"cells": {"0.0:100": _null_cell(54, 0)}}, [first, part])
    assert [(r["this_run"], r["earlier"], r["season"], r["seasons"]) for r in rows] == [(54, 71, 1, 125)]
    assert "this run pooled with `averse.json`, `part-1.json`" in pooled_markdown(rows, ["averse.json", "part-1.json"])
    with pytest.raises(SystemExit, match="--pool-with part-1.json and averse.json: they hold the same seasons"):
        check_pool(
            cells,
            [
                ("averse.json", first),
                ("part-1.json", first | {"meta": part["meta"] | {"arguments": "--cells 0.0:100:30-40"}}),
            ],
            "averse",
        )
    neutral = {**first, "meta": {**first["meta"], "learner_config": design_config("neutral")}}
    with pytest.raises(SystemExit, match="another design"):
        check_pool(cells, [("results.json", neutral)], "averse")


def test_pooling_refuses_runs_that_share_a_season_or_whose_seeds_are_unknown() -> None:
    earlier = {"meta": {"arguments": "--cells 0.0:100:20"}, "cells": {}}
    with pytest.raises(SystemExit, match=r"both runs hold 1 seasons, e\.g\. \(0\.0, 100, 19\)"):
        check_disjoint(parse_cells("0.0:100:19-30"), earlier, "results.json")
    with pytest.raises(SystemExit, match="its arguments name no --cells"):
        check_disjoint(parse_cells("0.0:100:1"), {"meta": {"arguments": "--medium"}, "cells": {}}, "old.json")


def test_pooling_refuses_a_results_file_of_another_design_or_of_no_recorded_design() -> None:
    same = {"meta": {"learner_config": design_config()}}
    check_same_design(same, "results.json")
    other = {"meta": {"learner_config": {**design_config(), "validation_fraction": 0.3}}}
    with pytest.raises(SystemExit, match=r"another design \(validation_fraction 0\.3 there, 0\.15 here\)"):
        check_same_design(other, "null-extension.json")
    with pytest.raises(SystemExit, match="records no learner configuration"):
        check_same_design({"meta": {"arguments": "--cells 0.0:100:20"}}, "null-extension.json")


def test_the_committed_results_record_the_design_the_study_runs_today() -> None:
    """Pooling a new run with the committed study needs its design on record (``--pool-with``):
    ``averse`` is the study of today's default learner, ``results`` the risk-neutral one's before it
    (its risk aversion unset, which chooses as 0 does)."""
    import json

    from benchmarks.power_study import RESULTS

    assert design_config() == design_config("averse")
    check_same_design(json.loads((RESULTS / "averse.json").read_text()), "averse.json")
    neutral = json.loads((RESULTS / "results.json").read_text())
    assert neutral["meta"]["learner_config"].get("shrinkage_risk_aversion") is None
    check_same_design(neutral, "results.json", "neutral")
    with pytest.raises(SystemExit, match=r"shrinkage_risk_aversion 0\.0 there, 1\.0 here"):
        check_same_design(neutral, "results.json")


def test_the_neutral_rows_must_come_from_the_risk_neutral_twin_of_the_averse_design() -> None:
    """``--neutral``: the same configuration but for the risk aversion, which it leaves unset."""
    averse = design_config("averse")
    assert averse["shrinkage_risk_aversion"] == 1.0
    twin = {k: v for k, v in averse.items() if k != "shrinkage_risk_aversion"}
    check_neutral({"meta": {"learner_config": twin}}, "results.json", "averse")
    check_neutral({"meta": {"learner_config": {**twin, "shrinkage_risk_aversion": 0.0}}}, "zero.json", "averse")
    with pytest.raises(
        SystemExit, match=r"--neutral averse\.json: its learner is risk-averse \(shrinkage_risk_aversion 1\.0\)"
    ):
        check_neutral({"meta": {"learner_config": averse}}, "averse.json", "averse")
    with pytest.raises(SystemExit, match=r"beyond the risk aversion \(validation_fraction 0\.3 there, 0\.15 here\)"):
        check_neutral({"meta": {"learner_config": {**twin, "validation_fraction": 0.3}}}, "share-30.json", "averse")
    with pytest.raises(SystemExit, match="records no learner configuration"):
        check_neutral({"meta": {}}, "old.json", "averse")


def test_seasons_fitted_with_another_configuration_are_refused_when_loaded() -> None:
    def season(config: dict) -> Season:
        covered = Look(night=2, judged=80, coverage=True, offline={"config": config})
        return Season(0.0, 100, 7, 0.0, 300, [Look(night=1, judged=40), covered], 1.0)

    check_seasons_config([season(design_config())])
    with pytest.raises(SystemExit, match="season d0.00_n100_s7: fitted with another configuration"):
        check_seasons_config([season({**design_config(), "validation_fraction": 0.3})])
