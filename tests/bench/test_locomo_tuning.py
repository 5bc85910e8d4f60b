"""The default-tuning benchmark: its pre-declared choice rule, and one small run end to end on a
development conversation (skipped where the data is absent)."""

import json

import pytest

from benchmarks import locomo_tuning
from benchmarks.locomo_tuning import Config, bm25_closeness, choose, weight_simplicity
from prme_assets.demo.data import find_locomo_data
from prme_core.datasets.locomo import LocomoDataNotFound


def _row(config: Config, ndcg: float) -> dict:
    return {"config": config, "feedback": {"pooled": {"ndcg": ndcg, "recall": 0.0, "groups": 1}}}


def test_the_best_configuration_wins_when_nothing_is_within_the_margin():
    rows = [_row(Config(1.5, 0.75), 0.40), _row(Config(0.9, 0.4), 0.45), _row(Config(0.3, 0.1), 0.44)]
    assert choose(rows, bm25_closeness)["config"] == Config(0.9, 0.4)


def test_within_the_margin_the_bm25_closest_to_the_reference_wins():
    rows = [_row(Config(0.3, 0.1), 0.4500), _row(Config(0.9, 0.4), 0.4485), _row(Config(1.5, 0.75), 0.40)]
    assert choose(rows, bm25_closeness)["config"] == Config(0.9, 0.4)


def test_within_the_margin_fewer_then_smaller_interaction_weights_win():
    two = Config(0.9, 0.4, (("term_coverage", 0.2), ("entity_match", 0.1)))
    one_big = Config(0.9, 0.4, (("term_coverage", 0.4), ("entity_match", 0.0)))
    one_small = Config(0.9, 0.4, (("term_coverage", 0.2), ("entity_match", 0.0)))
    rows = [_row(two, 0.5000), _row(one_big, 0.4990), _row(one_small, 0.4985)]
    assert choose(rows, weight_simplicity)["config"] == one_small


def _data():
    try:
        return find_locomo_data()
    except LocomoDataNotFound:
        return None


@pytest.mark.skipif(_data() is None, reason="LoCoMo development data not found (../shared/data/locomo/)")
def test_a_small_tuning_run_chooses_on_feedback_and_reports_the_holdout_once(tmp_path):
    report = locomo_tuning.main(
        ["--conversations", "conv-30", "--k1", "0.9,1.5", "--b", "0.4,0.75", "--bm25-only", "--out", str(tmp_path)]
    )
    assert report == 0
    saved = json.loads((tmp_path / "tuning.json").read_text())
    assert len(saved["bm25_grid"]) == 4
    best = max(r["feedback"]["pooled"]["ndcg"] for r in saved["bm25_grid"])
    chosen = next(r for r in saved["bm25_grid"] if r["config"] == saved["chosen"])
    assert chosen["feedback"]["pooled"]["ndcg"] >= best - locomo_tuning.TIE_MARGIN
    pooled = saved["holdout"]["chosen"]["pooled"]
    assert pooled["groups"] == saved["data"]["holdout_questions"]["conv-30"]
    assert pooled["interval"][0] <= pooled["ndcg_gain"] <= pooled["interval"][1]
    assert "## Holdout" in (tmp_path / "tuning.md").read_text()
