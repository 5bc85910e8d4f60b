"""The default-tuning benchmark: its pre-declared choice rule, where it writes, and small runs end
to end on a development conversation (skipped where the data is absent): a tuning, and a
confirmation of the current defaults that chooses nothing."""

import json

import pytest

from benchmarks import locomo_tuning
from benchmarks.locomo_tuning import Config, bm25_closeness, choose, committed_out, weight_simplicity
from prme_core.settings import EngineSettings
from tests.locomo_data import needs_data


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


def test_committed_results_are_per_embedding_so_a_minilm_run_never_overwrites_the_hashed_tuning():
    assert committed_out("hashed") == locomo_tuning.COMMITTED_RESULTS / "tuning"
    assert committed_out("minilm") == locomo_tuning.COMMITTED_RESULTS / "tuning-minilm"


@pytest.mark.parametrize("stem", ["tuning/tuning", "tuning-minilm/confirmation"])
def test_the_committed_markdown_is_rendered_from_the_committed_json(stem):
    saved = locomo_tuning.COMMITTED_RESULTS / stem
    report = json.loads(saved.with_suffix(".json").read_text(encoding="utf-8"))
    assert locomo_tuning.markdown(report) == saved.with_suffix(".md").read_text(encoding="utf-8")


@needs_data
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


@needs_data
def test_confirm_only_scores_the_current_defaults_against_the_reference_and_chooses_nothing(tmp_path):
    assert locomo_tuning.main(["--conversations", "conv-30", "--confirm-only", "--out", str(tmp_path)]) == 0
    assert not (tmp_path / "tuning.json").exists()
    saved = json.loads((tmp_path / "confirmation.json").read_text())
    assert saved["schema"] == "prme-locomo-confirmation-v1"
    assert "bm25_grid" not in saved and "interaction_grid" not in saved
    defaults = EngineSettings()
    assert (saved["chosen"]["k1"], saved["chosen"]["b"]) == (defaults.bm25.k1, defaults.bm25.b)
    assert all(saved["chosen"][name] == getattr(defaults.scoring, name) for name in locomo_tuning.interaction_fields())
    assert (saved["method"]["reference"]["k1"], saved["method"]["reference"]["b"]) == (1.5, 0.75)
    feedback, holdout = saved["data"]["feedback_questions"]["conv-30"], saved["data"]["holdout_questions"]["conv-30"]
    # each question set once per arm: the feedback under reference and defaults, the holdout once per arm
    arms = 2 if saved["chosen"] == saved["chosen_bm25"] else 3
    assert saved["retrievals"] == 2 * feedback + arms * holdout
    comparison = saved["holdout"]["chosen"]
    assert comparison["pooled"]["groups"] == holdout
    assert sum(block["groups"] for block in comparison["categories"].values()) == holdout
    for block in [comparison["pooled"], *comparison["owners"].values(), *comparison["categories"].values()]:
        low, high = block["interval"]
        assert low <= block["ndcg_gain"] <= high
        assert block["worse_beyond_interval"] == (high < 0)
    text = (tmp_path / "confirmation.md").read_text()
    assert "## Holdout, current defaults vs reference" in text and "Stage 1" not in text
