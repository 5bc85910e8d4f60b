"""Shrinking a pool proposal toward the identity by a factor that inner folds of its own training
groups choose (``pool_fit.shrunk_search``): the arithmetic, the choice and its tie rule, what the
choice may read, what a report records and refuses, and constructed planted-effect cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from prme_core.learning import offline, pool_fit
from prme_core.learning.config import RISK_DEFAULTS, SHRINKAGE_DEFAULTS, LearningConfig
from prme_core.learning.observations import prepare
from prme_core.learning.offline import evaluate_prepared
from prme_core.learning.pool_fit import Parameters, choose_factor, inner_folds, shrink
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.snapshot import snapshot_from_receipts
from prme_core.retrieval.multipliers import FACTOR_COUNT
from tests.learning.test_learning_offline import _dataset, _evaluate, _records

GRID = SHRINKAGE_DEFAULTS["shrinkage_grid"]


def test_shrinking_scales_log_multipliers_and_the_interaction_weights_distance_from_the_base():
    base = (0.1, 0.2, 0.0)
    p = Parameters((math.log(4.0), -math.log(2.0), 0.0, 0.0, 0.0, 0.0), (0.3, 0.2, 0.5))
    assert shrink(p, base, 1.0).log_multipliers == p.log_multipliers
    assert shrink(p, base, 1.0).interactions == pytest.approx(p.interactions)
    assert shrink(p, base, 0.0) == Parameters((0.0,) * FACTOR_COUNT, base)
    half = shrink(p, base, 0.5)
    assert half.log_multipliers[:2] == (pytest.approx(math.log(2.0)), pytest.approx(-math.log(2.0) / 2))
    assert half.interactions == (pytest.approx(0.2), pytest.approx(0.2), pytest.approx(0.25))
    assert shrink(Parameters(p.log_multipliers, None), base, 0.5).interactions is None


def test_the_best_held_out_factor_wins_and_ties_go_toward_the_identity():
    five = (0.0, 0.25, 0.5, 0.75, 1.0)
    assert choose_factor(five, [0.40, 0.42, 0.45, 0.44, 0.43]) == 0.5
    assert choose_factor(five, [0.40, 0.45, 0.45, 0.45, 0.40]) == 0.25
    assert choose_factor(five, [0.5] * 5) == 0.0  # nothing to choose between: the identity
    assert choose_factor(five, []) == 0.0  # no inner evidence: the smallest factor
    assert GRID == (0.5, 0.75, 1.0) and choose_factor(GRID, [0.61, 0.60, 0.59]) == 0.5  # the default's floor
    assert choose_factor((1.0,), []) == 1.0  # shrinkage off


def test_a_risk_averse_choice_counts_each_unit_lost_one_plus_the_aversion_times():
    # held-out NDCG rises with the factor, and so does the harm of the groups that lose
    ndcg, harm = [0.600, 0.602, 0.605], [0.010, 0.020, 0.035]
    assert choose_factor(GRID, ndcg) == 1.0  # risk-neutral: the best NDCG
    assert choose_factor(GRID, ndcg, harm, 0.0) == 1.0  # no aversion: the same choice
    assert choose_factor(GRID, ndcg, harm, 0.1) == 1.0  # 0.6035 > 0.6000 > 0.5990
    assert choose_factor(GRID, ndcg, harm, 1.0) == 0.5  # 0.590 > 0.582 > 0.570
    # a gain that outweighs its harm is still taken
    assert choose_factor(GRID, [0.60, 0.63, 0.66], [0.010, 0.015, 0.020], 1.0) == 1.0
    # ties of the risk-adjusted score go toward the identity, as ever
    assert choose_factor(GRID, [0.60, 0.61, 0.62], [0.0, 0.01, 0.02], 1.0) == 0.5
    assert choose_factor(GRID, [], [], 1.0) == 0.5  # no inner evidence: the smallest factor


@pytest.mark.parametrize("aversion", [-0.5, 10.5])
def test_a_risk_aversion_out_of_bounds_is_refused_naming_the_field_and_the_bound(aversion):
    with pytest.raises(ValidationError, match="shrinkage_risk_aversion") as caught:
        LearningConfig(shrinkage_risk_aversion=aversion)
    assert ("greater than or equal to 0" if aversion < 0 else "less than or equal to 10") in str(caught.value)


def test_inner_folds_are_seeded_balanced_and_deterministic():
    folds = inner_folds(20, 3, seed=42)
    assert sorted(np.bincount(folds).tolist()) == [6, 7, 7]
    assert (inner_folds(20, 3, seed=42) == folds).all()
    assert not (inner_folds(20, 3, seed=43) == folds).all()


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ([], "holds 1 to 21 factors"),
        ([0.0, 0.5], "must end at 1.0"),
        ([0.5, 0.25, 1.0], "strictly increasing"),
        ([-0.5, 1.0], r"lie in \[0, 1\]"),
        ([0.0, 1.0, 1.5], r"lie in \[0, 1\]"),
    ],
)
def test_a_bad_grid_is_refused_naming_the_field_and_the_bound(grid, message):
    with pytest.raises(ValidationError, match=message) as caught:
        LearningConfig(shrinkage_grid=grid)
    assert "shrinkage_grid" in str(caught.value)
    with pytest.raises(ValidationError, match="shrinkage_folds"):
        LearningConfig(shrinkage_folds=1)


def _world(delta: float, n: int, seed: int) -> tuple[list, list]:
    """The power study's owner draws (``benchmarks.power_world``): n judged retrievals with
    complete recorded pools, and their feedback; a true full-retrieval gain δ planted."""
    from benchmarks import power_study as ps
    from benchmarks import power_world as world

    beta = {0.0: 0.0, 0.03: 0.13281}[delta]  # power_world.calibrate's planted weight for δ
    rng = np.random.default_rng([int(delta * 1e4), n, seed])
    tag = f"power:{delta}:{n}:{seed}"
    receipts, records = [], []
    for i, q in enumerate(world.draw_queries(rng, beta, n, f"feedback {seed}")):
        receipt, ids = world.receipt_of(q, f"{tag}:feedback:{i}")
        records.append(world.feedback_record(receipt, {ids[j] for j in q.relevant}, f"{tag}:record:{i}"))
        receipts.append((receipt, ps._checksum(receipt)))
    return receipts, records


def _prepared(receipts: list, records: list, config: LearningConfig | None = None):
    from benchmarks import power_world as world

    snapshot = snapshot_from_receipts(world.OWNER, receipts, records)
    return prepare(snapshot, owner=world.OWNER, scopes=list(world.SCOPES), config=config)


@pytest.fixture(scope="module")
def world_120():
    return _world(0.03, 120, 0)


@pytest.fixture(scope="module")
def report_120(world_120):
    """The default learner's report: its shrinkage factor chosen risk-averse (``RISK_DEFAULTS``)."""
    return evaluate_prepared(_prepared(*world_120))


@pytest.fixture(scope="module")
def neutral_120(world_120):
    """The same feedback fitted by the risk-neutral learner (the default before)."""
    return evaluate_prepared(_prepared(*world_120, LearningConfig(shrinkage_risk_aversion=0.0)))


def test_only_the_training_groups_reach_the_shrinkage_and_a_fold_never_sees_its_own(monkeypatch, world_120):
    prepared = _prepared(*world_120)
    validation = {i for i, r in enumerate(prepared.requests) if prepared.groups[r.group].validation}
    position = {id(prepared.pools[i]): i for i in prepared.pools}
    seen: list[set[int]] = []
    real = pool_fit.shrunk_search

    def spy(requests, *args, **kwargs):
        seen.append({position[id(r)] for r in requests})
        return real(requests, *args, **kwargs)

    monkeypatch.setattr(offline, "shrunk_search", spy)
    report = evaluate_prepared(prepared)
    assert report.fit_path == "pool" and len(seen) == 1 + prepared.config.crossfit_folds  # the proposal, each fold's
    assert all(rows and not rows & validation for rows in seen)
    fold_of = {c.group_id: c.fold for c in report.crossfit}
    whole = max(seen, key=len)
    assert {fold_of[prepared.requests[i].group] for i in whole} == set(range(prepared.config.crossfit_folds))
    for rows in (r for r in seen if r is not whole):  # every training group but those of the fold's own
        assert len({fold_of[prepared.requests[i].group] for i in rows}) == prepared.config.crossfit_folds - 1


def test_validation_labels_never_choose_the_factor(world_120, report_120):
    receipts, records = world_120
    validation = {rid for q in report_120.queries if q.split == "validation" for rid in q.request_ids}
    flipped = [
        r.model_copy(update={"labels": {k: not v for k, v in r.labels.items()}}) if r.request_id in validation else r
        for r in records
    ]
    again = evaluate_prepared(_prepared(receipts, flipped))
    assert (again.shrinkage, again.crossfit_shrinkage) == (report_120.shrinkage, report_120.crossfit_shrinkage)
    assert again.multipliers == report_120.multipliers
    assert again.crossfit_multipliers == report_120.crossfit_multipliers
    assert again.validation_ndcg_gain != report_120.validation_ndcg_gain  # the flip did reach validation


def test_a_report_records_each_choice_and_refuses_one_its_inner_folds_did_not_make(report_120):
    report = report_120
    assert report.config.shrinkage_grid == GRID and report.config.shrinkage_folds == 3
    assert len(report.shrinkage.inner_ndcg) == len(GRID) and len(report.crossfit_shrinkage) == 3
    assert report.shrinkage.factor == choose_factor(GRID, report.shrinkage.inner_ndcg, report.shrinkage.inner_harm, 1.0)
    data = report.model_dump(mode="json")
    assert LearningEvaluation.model_validate(data) == report
    other = next(f for f in GRID if f != report.shrinkage.factor)
    folds = data["crossfit_shrinkage"]
    tampered = [
        ({**data, "shrinkage": {**data["shrinkage"], "factor": other}}, "is not the one its inner folds choose"),
        ({**data, "shrinkage": {**data["shrinkage"], "inner_ndcg": [0.5, 0.5]}}, "for each of the 3"),
        ({**data, "shrinkage": None}, "records how it shrank"),
        ({**data, "crossfit_shrinkage": folds[:2]}, "one shrinkage choice per cross-fitting fold"),
        ({**data, "config": {**data["config"], "shrinkage_folds": None}}, "both shrinkage fields or neither"),
    ]
    for bad, message in tampered:
        with pytest.raises(ValidationError, match=message):
            LearningEvaluation.model_validate(bad)


def test_a_risk_averse_report_records_each_factors_harm_and_refuses_a_choice_its_harm_did_not_make(
    report_120, neutral_120
):
    averse = report_120  # the default learner: risk-averse, α = 1, recorded resolved
    assert averse.config.shrinkage_risk_aversion == RISK_DEFAULTS["shrinkage_risk_aversion"] == 1.0
    for choice in (averse.shrinkage, *averse.crossfit_shrinkage):
        assert len(choice.inner_harm) == len(GRID) and all(h >= 0.0 for h in choice.inner_harm)
        assert choice.factor == choose_factor(GRID, choice.inner_ndcg, choice.inner_harm, 1.0)
    # the same inner searches: the NDCG evidence is the risk-neutral report's, only the choice may differ
    assert averse.shrinkage.inner_ndcg == neutral_120.shrinkage.inner_ndcg
    assert averse.shrinkage.inner_harm == neutral_120.shrinkage.inner_harm
    for choice in (neutral_120.shrinkage, *neutral_120.crossfit_shrinkage):  # α = 0: the best held-out NDCG
        assert choice.factor == choose_factor(GRID, choice.inner_ndcg)
    data = averse.model_dump(mode="json")
    assert data["config"]["shrinkage_risk_aversion"] == 1.0
    assert LearningEvaluation.model_validate(data) == averse
    other = next(j for j, f in enumerate(GRID) if f != averse.shrinkage.factor)
    favours_other = [h + (0.0 if j == other else 1.0) for j, h in enumerate(averse.shrinkage.inner_harm)]
    tampered = [
        ({**data, "shrinkage": {**data["shrinkage"], "inner_harm": []}}, "harm is recorded for each shrinkage factor"),
        ({**data, "config": {**data["config"], "shrinkage_risk_aversion": None}}, "harm is recorded"),
        ({**data, "shrinkage": {**data["shrinkage"], "inner_harm": favours_other}}, "less the risk aversion"),
    ]
    for bad, message in tampered:
        with pytest.raises(ValidationError, match=message):
            LearningEvaluation.model_validate(bad)


def test_a_report_written_before_the_risk_averse_default_keeps_its_bytes_and_its_risk_neutral_meaning(neutral_120):
    """An older report records no risk aversion and no harm (it chose by held-out NDCG alone): it
    still validates, re-serializes to the same bytes, and is never re-resolved to the new default."""
    data = neutral_120.model_dump(mode="json")
    data["config"].pop("shrinkage_risk_aversion")
    for choice in (data["shrinkage"], *data["crossfit_shrinkage"]):
        choice.pop("inner_harm")
    older = LearningEvaluation.model_validate(data)
    assert older.config.shrinkage_risk_aversion is None and older.shrinkage.inner_harm is None
    assert older.model_dump(mode="json") == data
    assert older.shrinkage.factor == neutral_120.shrinkage.factor


def test_the_judged_path_records_no_shrinkage_and_refuses_one():
    rng, items = _dataset()
    judged = _evaluate(items, _records(rng, items))
    assert judged.fit_path == "judged" and judged.decision != "insufficient_data"
    assert judged.shrinkage is None and judged.crossfit_shrinkage is None
    data = judged.model_dump(mode="json")
    with pytest.raises(ValidationError, match="only a pool fit with a shrinkage grid"):
        LearningEvaluation.model_validate({**data, "shrinkage": {"factor": 0.0}})


def test_a_one_value_grid_is_the_search_itself(world_120):
    plain = evaluate_prepared(_prepared(*world_120, LearningConfig(shrinkage_grid=(1.0,))))
    assert plain.shrinkage.factor == 1.0 and plain.shrinkage.inner_ndcg == () and not plain.shrinkage.kept_identity
    assert all(c.factor == 1.0 and c.inner_ndcg == () for c in plain.crossfit_shrinkage)
    assert plain.alternative.multipliers != plain.multipliers  # the other objective, unshrunk


# --- constructed planted-effect cases (the power study's world; slow) ------------------------------


def _last_night(delta: float, n: int, seed: int, config: LearningConfig) -> LearningEvaluation:
    return evaluate_prepared(_prepared(*_world(delta, n, seed), config))


@pytest.mark.slow
def test_a_planted_gain_passes_the_offline_gate_more_often_shrunk_and_a_null_never_does():
    from benchmarks import power_study as ps

    seeds = range(3)  # three owners per arm: the cheapest set that still orders the learners
    passed = lambda reports: sum(r.decision == "improved_on_observed_candidates" for r in reports)  # noqa: E731
    shrunk = [_last_night(0.03, 400, s, ps.STUDY_CONFIG) for s in seeds]
    plain = [_last_night(0.03, 400, s, ps.PLAIN_CONFIG) for s in seeds]
    assert passed(shrunk) >= 2 and passed(shrunk) > passed(plain)
    nulls = [_last_night(0.0, 400, s, ps.STUDY_CONFIG) for s in seeds]
    assert passed(nulls) == 0
    # under the null the inner folds lean to the identity: most proposals take the grid's floor
    assert sum(r.shrinkage.factor == min(GRID) for r in nulls) >= 2
