"""The holdout's budget spent over the partition's proposals (version-4 reports): the schedule
and its bound, constructed cases (a true gain confirmed where the level allows, noise not, a
long season of nightly proposals within the budget), and the store's numbering of proposals
that profile creation re-derives (both backends)."""

from __future__ import annotations

import numpy as np
import pytest

from prme_core.errors import InvalidEvidence, InvalidInput
from prme_core.learning.full_retrieval import (
    DEFAULT_ALPHA_BUDGET,
    FullRetrievalEvaluationConfig,
    evaluate_full_retrieval,
)
from prme_core.learning.gates import (
    DEFAULT_LEVEL_CAP,
    holdout_level,
    level_constant,
    lifetime_bound,
)
from prme_core.learning.looks import proposal_look
from prme_core.learning.reports import record_report
from prme_core.receipts.store import get_receipts
from tests.learning.test_gates_v3 import PASSED, confirm_at, paired, screen
from tests.learning_lab import HOLDOUT_CONFIG, LAB_OWNER, LAB_SCOPES, LEARNING_CONFIG, build_lab
from tests.tampering import tamper

OFFLINE = 0.025


def level(t: int, j: int = 1) -> float:
    return holdout_level(t, j, budget=DEFAULT_ALPHA_BUDGET, offline_alpha=OFFLINE)


def offline(d: np.ndarray) -> str:
    return screen(d, OFFLINE)


def test_the_first_twenty_proposals_confirm_at_the_cap_and_later_ones_at_a_shrinking_level():
    assert level_constant(DEFAULT_ALPHA_BUDGET, OFFLINE, DEFAULT_LEVEL_CAP) == pytest.approx(10.5)
    assert [level(t) for t in (1, 10, 20)] == [pytest.approx(0.025)] * 3
    assert level(21) == pytest.approx(10.5 / (21 * 22)) and level(100) == pytest.approx(10.5 / 10_100)
    assert level(3, 2) == pytest.approx(0.025 / 3) and level(3, 3) == pytest.approx(0.025 / 6)
    with pytest.raises(ValueError, match="numbered from 1"):
        level(0)


@pytest.mark.parametrize(
    ("budget", "offline_alpha", "cap"),
    [(0.05, 0.025, 0.025), (0.05, 0.2, 0.025), (0.01, 0.025, 0.025), (0.05, 0.025, 0.3), (0.05, 1.0, 0.025)],
)
def test_every_proposal_and_look_together_never_spend_more_than_the_budget(budget, offline_alpha, cap):
    c = level_constant(budget, offline_alpha, cap)
    nights = 100_000
    levels = np.minimum(cap, c / (np.arange(1, nights + 1) * np.arange(2, nights + 2)))
    looks = sum(2.0 / (j * (j + 1)) for j in range(1, 10_001))  # every look at one proposal: < 2
    spent = offline_alpha * looks * levels.sum()
    assert spent <= budget + 1e-12 and lifetime_bound(budget, offline_alpha, cap) <= budget + 1e-12
    assert lifetime_bound(budget, offline_alpha, cap) == pytest.approx(budget, rel=1e-9)  # c is the largest
    assert lifetime_bound(budget, offline_alpha, cap, proposals=10) <= 2 * offline_alpha * 10 * cap + 1e-12


def test_a_true_holdout_gain_is_confirmed_on_a_late_nights_proposal_too():
    """+0.03 over 300 groups: confirmed at the cap (night 5) and still mostly at night 40's level."""
    rng = np.random.default_rng(11)
    early = np.mean(
        [confirm_at(paired(rng, 300, 0.03, changed=0.25, spread=0.25), level(5)) in PASSED for _ in range(200)]
    )
    late = np.mean(
        [confirm_at(paired(rng, 300, 0.03, changed=0.25, spread=0.25), level(40)) in PASSED for _ in range(200)]
    )
    assert early >= 0.8 and late >= 0.5 and early >= late, (early, late)


def test_noise_is_confirmed_at_most_at_the_level_of_its_proposal():
    rng = np.random.default_rng(12)
    passed = np.mean([confirm_at(paired(rng, 300, 0.0, changed=0.25), level(1)) in PASSED for _ in range(1000)])
    assert passed <= level(1) + 0.015, passed


def test_a_long_season_of_nightly_proposals_on_noise_stays_within_the_budget():
    """Sixty nights, every night a new proposal screened at 2.5% and, when it passes, its holdout
    at its night's level: far fewer confirmations than the budget (the bound is for a lifetime)."""
    rng = np.random.default_rng(13)
    seasons, confirmed = 2000, 0
    for _ in range(seasons):
        for night in range(1, 61):
            if offline(paired(rng, 150, 0.0)) not in PASSED:
                continue
            if confirm_at(paired(rng, 300, 0.0, changed=0.25), level(night)) in PASSED:
                confirmed += 1
                break
    assert confirmed / seasons <= DEFAULT_ALPHA_BUDGET, confirmed
    assert confirmed / seasons <= lifetime_bound(DEFAULT_ALPHA_BUDGET, OFFLINE, proposals=60) + 0.005, confirmed


def test_a_version_4_configuration_derives_its_level_from_the_proposal_and_the_look():
    cfg = FullRetrievalEvaluationConfig().resolved(look=2, offline_look=30, offline_alpha=OFFLINE)
    assert (cfg.offline_look, cfg.offline_alpha, cfg.level_cap) == (30, OFFLINE, DEFAULT_LEVEL_CAP)
    assert cfg.max_p_value == pytest.approx(10.5 / (30 * 31) / 3) and cfg.per_proposal
    with pytest.raises(InvalidInput, match="offline_alpha"):
        FullRetrievalEvaluationConfig().resolved(offline_look=3)
    with pytest.raises(InvalidInput, match="level_cap"):
        FullRetrievalEvaluationConfig(level_cap=0.05).resolved(look=1)
    v3 = FullRetrievalEvaluationConfig().resolved(look=2)
    assert not v3.per_proposal and "offline_look" not in v3.model_dump()  # version-3 bytes unchanged


def test_the_store_numbers_a_partitions_proposals_and_profiles_re_derive_the_number(client):
    build_lab(client)
    first = client.evaluate_learning(LAB_OWNER, scopes=LAB_SCOPES, config=LEARNING_CONFIG)
    assert proposal_look(client.store, first).offline_look == 1
    again = client.evaluate_learning(LAB_OWNER, scopes=LAB_SCOPES, config=LEARNING_CONFIG)
    assert again == first and proposal_look(client.store, again).offline_look == 1  # the same record
    second = client.evaluate_learning(LAB_OWNER, scopes=LAB_SCOPES, config={**LEARNING_CONFIG, "seed": 7})
    assert proposal_look(client.store, second).offline_look == 2
    assert proposal_look(client.store, second).offline_alpha == second.config.max_p_value
    holdout = client.evaluate_holdout(second, config=HOLDOUT_CONFIG)
    assert holdout.schema_version == 4 and (holdout.config.offline_look, holdout.config.look) == (2, 1)
    assert holdout.config.max_p_value == pytest.approx(0.025)
    # a self-consistent report of the same trials claiming the first proposal's place is refused
    ids = [r for t in holdout.trials for r in (t.baseline_request_id, t.candidate_request_id)]
    claimed = evaluate_full_retrieval(
        get_receipts(client.store, LAB_OWNER, ids),
        holdout.trials,
        owner=LAB_OWNER,
        scopes=LAB_SCOPES,
        proposal_input_checksum=second.input_checksum,
        memory_artifact_sha256=holdout.memory_artifact_sha256,
        candidate_multipliers=second.multipliers,
        config=HOLDOUT_CONFIG,
        look=1,
        offline_look=1,
        offline_alpha=OFFLINE,
    )
    record_report(client.store, claimed)
    if second.decision == "improved_on_observed_candidates" and claimed.decision == "improved_full_retrieval":
        with pytest.raises(InvalidEvidence, match="claims offline look 1"):
            client.create_ranking_profile(second, claimed, owner=LAB_OWNER)
    else:
        pytest.fail(f"the lab should give a positive proposal and holdout, got {second.decision}, {claimed.decision}")


def test_a_proposal_the_store_did_not_record_spends_by_the_version_3_rule(client):
    build_lab(client)
    proposal = client.evaluate_learning(LAB_OWNER, scopes=LAB_SCOPES, config=LEARNING_CONFIG)
    tamper(client.store, "DELETE FROM operations WHERE op_type = ?", ["learning_report"])
    assert proposal_look(client.store, proposal) is None
    holdout = client.evaluate_holdout(proposal, config=HOLDOUT_CONFIG)
    assert holdout.schema_version == 3 and holdout.config.offline_look is None
