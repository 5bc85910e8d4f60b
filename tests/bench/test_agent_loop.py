"""The agent-loop benchmark's options: a learning policy other than the default is named in its
report and never overwrites the committed results (the seasons themselves need a server and
PostgreSQL; `python -m benchmarks.agent_loop` runs them)."""

from __future__ import annotations

import pytest

from benchmarks.agent_loop import build_parser, markdown
from benchmarks.locomo_learning import run_policy
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
    options = build_parser().parse_args(["--policy", "shrinkage_risk_aversion=1", "--out", "elsewhere"])
    overrides, policy = run_policy(options)
    assert overrides == {"shrinkage_risk_aversion": 1} and policy.shrinkage_risk_aversion == 1
    meta = {"seconds": 60, "nights": 10, "agents": ["exact", "null"], "policy_overrides": overrides}
    text = markdown([_season("exact"), _season("null")], meta)
    assert "The learning policy is the default but shrinkage_risk_aversion = 1." in text
    assert "The learning policy is the default." in markdown([_season("null")], {**meta, "policy_overrides": {}})


def test_an_override_never_overwrites_the_committed_results_and_a_bad_field_is_named() -> None:
    with pytest.raises(InvalidInput, match="the committed results are the default policy's"):
        run_policy(build_parser().parse_args(["--policy", "shrinkage_risk_aversion=1", "--update-results"]))
    with pytest.raises(InvalidInput, match="'risk' is not a learning-policy field"):
        run_policy(build_parser().parse_args(["--policy", "risk=1"]))
