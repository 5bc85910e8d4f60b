"""The risk-averse shrinkage probe (``benchmarks.risk_probe``): its two arms, its paired summary,
its input bounds and one small end-to-end run."""

from __future__ import annotations

import json

import pytest

from benchmarks import risk_probe
from benchmarks.power_study import design_config
from prme_core.errors import InvalidInput


def test_the_arms_are_the_study_learner_and_the_same_learner_risk_averse():
    arms = {arm: c.resolved().model_dump(mode="json") for arm, c in risk_probe.arm_configs(2.0).items()}
    assert arms["neutral"] == design_config("neutral")
    neutral, averse = arms["neutral"], arms["averse"]
    assert {k for k in {*neutral, *averse} if neutral.get(k) != averse.get(k)} == {"shrinkage_risk_aversion"}
    assert arms["averse"]["shrinkage_risk_aversion"] == 2.0


def _row(seed: int, arm: str, activated: bool, *, coverage: bool = True) -> dict:
    row = {"delta": 0.03, "n": 400, "seed": seed, "arm": arm, "coverage": coverage}
    if coverage:
        row |= {
            "offline": activated,
            "holdout": "improved_full_retrieval" if activated else "no_improvement",
            "activated": activated,
            "holdout_gain": 0.02,
            "harm": 0.01 if arm == "averse" else 0.02,
            "regressed": 0.05,
            "true_gain": 0.03,
        }
    return row


def test_the_summary_pairs_the_arms_on_each_draw_and_counts_the_owners_one_arm_alone_activated():
    rows = [
        *(_row(0, a, True) for a in ("neutral", "averse")),
        _row(1, "neutral", True),
        _row(1, "averse", False),
        _row(2, "neutral", False),
        _row(2, "averse", True),
        _row(3, "neutral", False, coverage=False),
        _row(3, "averse", False, coverage=False),
        _row(4, "neutral", True),  # its averse look is missing: not paired, not counted
    ]
    (cell,) = risk_probe.summarize(rows)
    assert cell["owners"] == 4 and (cell["only_neutral"], cell["only_averse"]) == (1, 1)
    assert cell["neutral"]["activated"] == cell["averse"]["activated"] == 2 and cell["averse"]["rate"] == 0.5
    assert cell["averse"]["mean_harm"] == pytest.approx(0.01) and cell["neutral"]["mean_harm"] == pytest.approx(0.02)
    assert cell["neutral"]["offline_passed"] == 2  # of the three covered looks
    assert "| +0.03 | 400 | 4 | averse | 2 of 4 |" in risk_probe.markdown(
        {"meta": {"arguments": "", "cpu_seconds": 60.0, "aversion": 1.0}, "cells": [cell]}
    )


@pytest.mark.parametrize(("flag", "value"), [("--aversion", "0"), ("--aversion", "10.5"), ("--workers", "0")])
def test_out_of_bounds_inputs_are_refused_naming_the_option(flag, value, tmp_path):
    with pytest.raises(InvalidInput, match=flag):
        risk_probe.main(["--cells", "0.03:200:1", flag, value, "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_one_risk_averse_look_reaches_the_gates_and_records_what_they_decided():
    config = risk_probe.arm_configs(1.0)["averse"].model_dump(mode="json")
    beta = 0.13281  # power_world.calibrate(0.03), as the power study's results record it
    row = risk_probe.judge((0.03, 140, 0, beta, "averse", config))
    assert row["coverage"]  # 140 queries reach the coverage minimum (20 validation groups at 15%)
    assert isinstance(row["offline"], bool) and row["holdout"] in ("improved_full_retrieval", "no_improvement")
    assert row["activated"] == (row["offline"] and row["holdout"] == "improved_full_retrieval")
    assert row["harm"] >= 0 and 0 <= row["regressed"] <= 1


def test_a_run_writes_both_arms_of_every_owner_paired(tmp_path, monkeypatch):
    def judged(args):
        delta, n, seed, _, arm, _ = args
        return {**_row(seed, arm, arm == "averse"), "delta": delta, "n": n, "cpu_seconds": 1.0}

    monkeypatch.setattr(risk_probe, "judge", judged)
    monkeypatch.setattr(risk_probe.world, "calibrate", lambda delta: 0.0)  # the judged looks read no beta
    assert risk_probe.main(["--cells", "0.03:200:2", "--workers", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "results.json").read_text())
    assert sorted((r["seed"], r["arm"]) for r in report["looks"]) == [
        (0, "averse"),
        (0, "neutral"),
        (1, "averse"),
        (1, "neutral"),
    ]
    (cell,) = report["cells"]
    assert (cell["owners"], cell["only_averse"], report["meta"]["aversion"]) == (2, 2, 1.0)
    assert "Risk-averse shrinkage probe" in (tmp_path / "results.md").read_text()
