"""The agent-loop benchmark's options: a learning policy other than the default is named in its
report and never overwrites the committed results (the seasons themselves need a server and
PostgreSQL; `python -m benchmarks.agent_loop` runs them)."""

from __future__ import annotations

import pytest

from benchmarks.agent_loop import build_parser, markdown
from benchmarks.locomo_learning import run_policy
from prme_assets.resources import LearningPolicyResource
from prme_core.errors import InvalidInput


def _season(agent: str) -> dict:
    night = {"usable": 3}
    return {
        "owner": "conv-26",
        "agent": agent,
        "feedback_questions": 10,
        "nights": [night],
        "questions_until_activation": None,
        "holdout_ndcg_before": None,
        "holdout_ndcg_after": None,
    }


def test_a_policy_override_is_checked_and_named_in_the_report() -> None:
    options = build_parser().parse_args(["--policy", "shrinkage_risk_aversion=0", "--out", "elsewhere"])
    overrides, policy = run_policy(options)
    assert overrides == {"shrinkage_risk_aversion": 0} and policy.shrinkage_risk_aversion == 0
    meta = {
        "seconds": 60,
        "nights": 10,
        "agents": ["exact", "null"],
        "policy_overrides": overrides,
        "policy": policy.model_dump(mode="json"),
    }
    text = markdown([_season("exact"), _season("null")], meta)
    assert "The learning policy is the default but shrinkage_risk_aversion = 0.0." in text
    default = {**meta, "policy_overrides": {}, "policy": LearningPolicyResource().model_dump(mode="json")}
    assert "The learning policy is the default." in markdown([_season("null")], default)


def test_a_run_recorded_before_its_policy_was_kept_whole_names_its_overrides() -> None:
    """The agent loop records its whole policy since the risk-averse default; an earlier run's
    report (``agent-loop-risk-neutral``) still names its ``--policy`` overrides."""
    meta = {"seconds": 60, "nights": 10, "agents": ["exact"], "policy_overrides": {"shrinkage_risk_aversion": 1}}
    assert "The learning policy is the default but shrinkage_risk_aversion = 1." in markdown([_season("exact")], meta)


def test_an_override_never_overwrites_the_committed_results_and_a_bad_field_is_named() -> None:
    with pytest.raises(InvalidInput, match="the committed results are the default policy's"):
        run_policy(build_parser().parse_args(["--policy", "shrinkage_risk_aversion=1", "--update-results"]))
    with pytest.raises(InvalidInput, match="'risk' is not a learning-policy field"):
        run_policy(build_parser().parse_args(["--policy", "risk=1"]))
