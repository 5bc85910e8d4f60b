"""Pool-replay fitting: a family-2 proposal chosen by re-ranking recorded pools, deterministic to
the byte, with the pairwise alternative beside it and the power figures it needs."""

from __future__ import annotations

import random

import orjson
import pytest
from pydantic import ValidationError

from prme_core import MemoryClient
from prme_core.canonical import sha256_hex
from prme_core.learning.config import LearningConfig
from prme_core.learning.offline import evaluate_learning
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.snapshot import cut_snapshot, snapshot_from_receipts
from prme_core.learning.split import fit_sample
from prme_core.learning.synthetic import synthetic_receipt, synthetic_record
from prme_core.receipts.store import receipt_bytes
from tests.learning_lab import LEARNING_CONFIG, build_lab

OWNER, SCOPES = "alice", ("personal",)


@pytest.fixture(scope="module")
def lab_snapshot(tmp_path_factory):
    url = f"duckdb:///{tmp_path_factory.mktemp('pool-fit') / 'lab.duckdb'}"
    with MemoryClient(url) as client:
        build_lab(client, holdout=False)
        yield cut_snapshot(client.store, OWNER)


def evaluate(snapshot, **config):
    return evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config={**LEARNING_CONFIG, **config})


def test_pool_fit_learns_the_planted_signal_with_a_family_2_proposal(lab_snapshot):
    report = evaluate(lab_snapshot)
    assert (report.schema_version, report.fit_path, report.algorithm, report.metric) == (
        3,
        "pool",
        "pool_ndcg_search_v2",
        "pool_judged_ndcg",
    )
    assert report.family == report.multipliers.family == "multipliers_interactions_v2"
    assert report.decision == "improved_on_observed_candidates" and report.validation_ndcg_gain > 0.1
    assert report.fit_reason.startswith("60 of 60 usable requests re-ranked from their recorded pools")
    assert report.training_loss_after < report.training_loss_before
    assert report.alternative.algorithm == "pool_pairwise_logistic_v2"
    assert report.observed_sd is not None and report.groups_for_power >= 2


def test_the_same_inputs_give_a_byte_identical_report(lab_snapshot):
    assert evaluate(lab_snapshot).canonical_bytes() == evaluate(lab_snapshot).canonical_bytes()


def test_the_pairwise_objective_is_the_named_alternative(lab_snapshot):
    # the alternative is the other objective's plain search; the proposal is shrunk unless the grid is [1.0]
    report = evaluate(lab_snapshot, fit="pool_pairwise", shrinkage_grid=[1.0])
    assert report.algorithm == "pool_pairwise_logistic_v2" and report.alternative.algorithm == "pool_ndcg_search_v2"
    assert report.multipliers == evaluate(lab_snapshot).alternative.multipliers
    assert report.shrinkage.factor == 1.0 and report.shrinkage.inner_ndcg == ()


def test_the_judged_path_stays_available_and_fits_family_1(lab_snapshot):
    report = evaluate(lab_snapshot, fit="judged_pairwise")
    assert (report.fit_path, report.algorithm, report.family, report.metric) == (
        "judged",
        "pairwise_weight_multipliers_v1",
        "multipliers_v1",
        "judged_ndcg",
    )
    assert report.alternative is None and report.multipliers.family == "multipliers_v1"


def test_a_family_1_pool_fit_searches_the_six_multipliers_only(lab_snapshot):
    report = evaluate(lab_snapshot, family="multipliers_v1")
    assert report.fit_path == "pool" and report.multipliers.interaction_vector() is None


def test_receipts_without_pools_keep_the_judged_path_and_say_why():
    rng = random.Random(3)
    receipts, records = [], []
    for i in range(80):
        receipt, relevant = synthetic_receipt(rng, owner=OWNER, query=f"question {i}")
        receipts.append((receipt, sha256_hex(receipt_bytes(receipt))))
        records.append(synthetic_record(rng, receipt, relevant))
    snapshot = snapshot_from_receipts(OWNER, receipts, records)
    report = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config={"min_validation_queries": 10})
    assert (
        report.fit_path == "judged" and "0 of" in report.fit_reason and "recorded features instead" in report.fit_reason
    )


def test_synthetic_receipts_with_pools_take_the_pool_path():
    rng = random.Random(4)
    receipts, records = [], []
    for i in range(80):
        receipt, relevant = synthetic_receipt(rng, owner=OWNER, query=f"question {i}", pool=40)
        receipts.append((receipt, sha256_hex(receipt_bytes(receipt))))
        records.append(synthetic_record(rng, receipt, relevant))
    snapshot = snapshot_from_receipts(OWNER, receipts, records)
    report = evaluate_learning(snapshot, owner=OWNER, scopes=SCOPES, config={"min_validation_queries": 10})
    assert report.fit_path == "pool" and report.multipliers.lexical > 1.0  # the planted lexical signal


@pytest.mark.parametrize(
    ("field", "value"), [("observed_sd", 0.5), ("groups_for_power", 9999), ("family", "multipliers_v1")]
)
def test_a_report_whose_power_or_family_disagrees_with_its_evidence_fails_to_load(lab_snapshot, field, value):
    data = orjson.loads(evaluate(lab_snapshot).model_dump_json())
    data[field] = value
    with pytest.raises(ValidationError):
        LearningEvaluation.model_validate(data)


def test_a_version_1_report_keeps_its_form():
    config = LearningConfig()
    assert "fit" not in config.model_dump() and "fit" in config.resolved().model_dump()
    rng = random.Random(5)
    receipt, relevant = synthetic_receipt(rng, owner=OWNER, query="q")
    fields = {
        "schema_version": 1,
        "owner": OWNER,
        "scopes": SCOPES,
        "surface": "results",
        "config": config,
        "snapshot_sha256": "0" * 64,
        "feedback_ids": (),
        "receipt_checksums": {},
        "multipliers": {},
        "decision": "insufficient_data",
        "coverage": {
            "feedback_records": 0,
            "requests_with_pairs": 0,
            "training_queries": 0,
            "validation_queries": 0,
            "explicit_pairs": 0,
        },
    }
    from prme_core.learning.proposal import learning_input_checksum

    fields["input_checksum"] = learning_input_checksum(
        owner=OWNER, scopes=SCOPES, surface="results", snapshot_sha256="0" * 64, query_groups={}
    )
    v1 = LearningEvaluation.model_validate(fields)
    dumped = v1.model_dump(mode="json")
    assert dumped["schema_version"] == 1 and not set(LearningEvaluation.ADDED_FIELDS) & set(dumped)
    assert not set(LearningConfig.ADDED_FIELDS) & set(dumped["config"])
    with pytest.raises(ValidationError, match="records nothing more"):
        LearningEvaluation.model_validate({**fields, "family": "multipliers_v1"})


def test_the_fit_sample_is_deterministic_bounded_and_spread_over_groups():
    ids = [f"r{i}" for i in range(100)]
    groups = [i % 7 for i in range(100)]
    chosen = fit_sample(ids, groups, limit=14, seed=1)
    assert chosen == fit_sample(ids, groups, limit=14, seed=1) and len(chosen) == 14
    assert sorted({groups[i] for i in chosen}) == list(range(7))
    assert fit_sample(ids, groups, limit=200, seed=1) == list(range(100))
