"""evaluate_full_retrieval over real paired receipts: decisions, fail-closed checks, tamper-proof reports.

The data set is honest by construction: for each topic the one memory about its repair is the
complete relevant set of the two repair questions. The lexical-heavy candidate ranks that
memory first where the baseline's salience and confidence prefer a vaguer high-salience note.
"""

import copy
import json
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from prme_core import MemoryClient
from prme_core.canonical import sha256_hex
from prme_core.errors import HoldoutIntegrityError, InvalidInput, ReceiptNotFound
from prme_core.learning.full_retrieval import (
    FullRetrievalEvaluation,
    FullRetrievalTrial,
    evaluate_full_retrieval,
)
from prme_core.learning.split import group_id
from prme_core.memory.models import DEFAULT_SCOPES
from prme_core.receipts.model import RetrievalExecution, RetrievalReceipt
from prme_core.receipts.store import receipt_bytes
from prme_core.retrieval.multipliers import UNITY
from prme_core.retrieval.text import normalize_query
from tests.learning_lab import SUBJECTS, store_repair_memories

NOW = datetime(2024, 6, 1, tzinfo=UTC)
SCOPES = list(DEFAULT_SCOPES)
CANDIDATE = {"lexical": 4.0}
PROPOSAL = sha256_hex("proposal inputs")
MEMORY = sha256_hex("memory artifact")
TOPICS = list(SUBJECTS)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "receipts"


@dataclass
class Lab:
    client: MemoryClient
    relevant: dict[str, uuid.UUID]  # topic -> its repair memory


@dataclass
class Holdout:
    receipts: dict[uuid.UUID, tuple[RetrievalReceipt, str]]
    trials: list[FullRetrievalTrial]


def _questions(topic: str) -> tuple[str, str]:
    return f"{topic} repair workshop costs", f"how much is the {topic} repair"


@pytest.fixture(scope="module")
def lab():
    client = MemoryClient("duckdb:///:memory:")
    relevant = store_repair_memories(client, TOPICS)
    client.store_batch("bob", ["Bob: the cat repair workshop is closed", "Bob: tea repair is not a thing"])
    yield Lab(client, relevant)
    client.close()


def _run(lab, query, multipliers, **kw):
    kw.setdefault("owner", "alice")
    kw.setdefault("reference_time", NOW)
    response = lab.client.retrieve(query, ranking_multipliers=multipliers, **kw)
    assert response.metadata.receipt_persisted
    return response.metadata.request_id, (response.receipt, response.metadata.receipt_checksum)


def _pair(lab, holdout, query, topic, *, group=None, baseline=UNITY, candidate=CANDIDATE, base_kw=None, cand_kw=None):
    """Run both arms, add their receipts to ``holdout`` and return the trial (not appended)."""
    b_id, b = _run(lab, query, baseline, **(base_kw or {}))
    c_id, c = _run(lab, query, candidate, **(cand_kw or {}))
    holdout.receipts[b_id], holdout.receipts[c_id] = b, c
    return FullRetrievalTrial(
        group_id=group or group_id(normalize_query(query)),
        baseline_request_id=b_id,
        candidate_request_id=c_id,
        relevant_node_ids=[lab.relevant[topic]],
    )


@pytest.fixture(scope="module")
def improving(lab) -> Holdout:
    holdout = Holdout({}, [])
    for topic in TOPICS[:20]:
        for query in _questions(topic):
            holdout.trials.append(_pair(lab, holdout, query, topic))
    return holdout


@pytest.fixture
def holdout(improving) -> Holdout:
    """A private copy of the improving holdout that a test may extend or break."""
    return Holdout(dict(improving.receipts), list(improving.trials))


def _evaluate(holdout: Holdout, **overrides) -> FullRetrievalEvaluation:
    args = dict(
        owner="alice",
        scopes=SCOPES,
        proposal_input_checksum=PROPOSAL,
        memory_artifact_sha256=MEMORY,
        candidate_multipliers=CANDIDATE,
    )
    args.update(overrides)
    return evaluate_full_retrieval(holdout.receipts, holdout.trials, **args)


@pytest.fixture(scope="module")
def report(improving) -> FullRetrievalEvaluation:
    return _evaluate(improving)


# --- decisions ------------------------------------------------------------------------------------


def test_candidate_ranking_relevant_memories_higher_is_an_improvement_with_a_positive_interval(report):
    assert report.decision == "improved_full_retrieval"
    low, high = report.ndcg_gain_interval
    assert 0.0 < low <= report.ndcg_gain <= high
    assert report.ndcg_gain >= report.config.min_ndcg_gain and report.candidate_ndcg > report.baseline_ndcg
    assert report.recall_gain >= 0.0 and report.regression_fraction <= report.config.max_regression_fraction
    assert report.coverage.model_dump() == {"trials": 40, "query_groups": 40, "relevant_nodes": 20}
    assert report.algorithm == "paired_full_retrieval_v1" and report.surface == "results"


def test_report_holds_both_receipt_checksums_of_every_trial(report, improving):
    assert len(report.receipt_checksums) == 80
    for trial in report.trials:
        for request_id in (trial.baseline_request_id, trial.candidate_request_id):
            assert report.receipt_checksums[request_id] == improving.receipts[request_id][1]


def test_report_binds_feature_identity_base_scoring_and_multipliers(report, improving):
    receipt = improving.receipts[improving.trials[0].baseline_request_id][0]
    assert report.feature_identity == receipt.execution.features
    assert report.feature_identity_sha256 == sha256_hex(
        json.dumps(receipt.execution.features, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    )
    assert report.base_scoring == receipt.scoring
    assert report.baseline_multipliers == UNITY and report.candidate_multipliers.lexical == 4.0


def test_aggregates_are_macro_averages_of_the_per_group_results(report):
    n = len(report.queries)
    assert report.baseline_ndcg == pytest.approx(sum(q.baseline_ndcg for q in report.queries) / n, abs=1e-12)
    assert report.candidate_recall == pytest.approx(sum(q.candidate_recall for q in report.queries) / n, abs=1e-12)
    assert [q.group_id for q in report.queries] == sorted(q.group_id for q in report.queries)


def test_report_round_trips_through_json(report):
    assert FullRetrievalEvaluation.model_validate_json(report.model_dump_json()) == report


def test_evaluation_does_not_mutate_its_inputs(improving):
    receipts, trials = dict(improving.receipts), copy.deepcopy(improving.trials)
    _evaluate(improving)
    assert improving.receipts == receipts and improving.trials == trials


def test_trial_and_receipt_order_do_not_change_the_report_bytes(report, improving):
    rng = random.Random(7)
    trials, items = list(improving.trials), list(improving.receipts.items())
    rng.shuffle(trials)
    rng.shuffle(items)
    shuffled = _evaluate(Holdout(dict(items), trials))
    assert shuffled.canonical_bytes() == report.canonical_bytes()


def test_a_single_query_group_is_insufficient_data_without_an_interval(improving):
    one_group = Holdout(improving.receipts, [t.model_copy(update={"group_id": "everything"}) for t in improving.trials])
    result = _evaluate(one_group)
    assert result.decision == "insufficient_data" and result.ndcg_gain_interval is None
    assert result.coverage.query_groups == 1 and len(result.queries[0].baseline_request_ids) == 40


def test_identical_arms_without_gain_are_no_improvement(lab):
    holdout = Holdout({}, [])
    for topic in TOPICS[20:26]:
        holdout.trials.append(_pair(lab, holdout, _questions(topic)[0], topic, candidate=UNITY))
    result = _evaluate(holdout, candidate_multipliers=UNITY, config={"min_query_groups": 5})
    assert result.decision == "no_improvement"
    assert result.ndcg_gain == 0.0 and result.ndcg_gain_interval == (0.0, 0.0) and result.regression_fraction == 0.0


def test_baseline_receipts_recorded_without_multipliers_count_as_unity(lab):
    holdout = Holdout({}, [])
    for topic in TOPICS[20:23]:
        holdout.trials.append(_pair(lab, holdout, _questions(topic)[0], topic, baseline=None))
    baseline = holdout.receipts[holdout.trials[0].baseline_request_id][0]
    assert "ranking_multipliers" not in baseline.execution.parameters
    assert _evaluate(holdout).decision == "insufficient_data"


# --- tampering ------------------------------------------------------------------------------------


def _flip_decision(d):
    d["decision"] = "no_improvement"


def _inflate_aggregate(d):
    d["candidate_recall"] = d["candidate_recall"] - 0.05


def _edit_input_checksum(d):
    d["input_checksum"] = sha256_hex("another input")


def _edit_group_metric(d):
    d["queries"][0]["candidate_ndcg"] = d["queries"][0]["baseline_ndcg"]


def _narrow_interval(d):
    d["ndcg_gain_interval"] = [d["ndcg_gain_interval"][0] + 0.01, d["ndcg_gain_interval"][1]]


def _drop_a_checksum(d):
    d["receipt_checksums"].pop(next(iter(d["receipt_checksums"])))


def _swap_relevant_set(d):
    d["trials"][0]["relevant_node_ids"] = [str(uuid.uuid4())]


def _edit_feature_identity(d):
    d["feature_identity"]["python"] = "0.0.0"


def _edit_coverage(d):
    d["coverage"]["relevant_nodes"] += 1


@pytest.mark.parametrize(
    "tamper",
    [
        _flip_decision,
        _inflate_aggregate,
        _edit_input_checksum,
        _edit_group_metric,
        _narrow_interval,
        _drop_a_checksum,
        _swap_relevant_set,
        _edit_feature_identity,
        _edit_coverage,
    ],
)
def test_tampered_report_fails_to_load(report, tamper):
    data = report.model_dump(mode="json")
    tamper(data)
    with pytest.raises(ValidationError):
        FullRetrievalEvaluation.model_validate(data)


# --- fail-closed inputs ---------------------------------------------------------------------------


def _replace_candidate(lab, holdout, index=0, *, kw=None, multipliers=CANDIDATE, query=None):
    """Rerun trial ``index``'s candidate arm with changed arguments."""
    trial = holdout.trials[index]
    base = holdout.receipts[trial.baseline_request_id][0]
    c_id, c = _run(lab, query or base.query, multipliers, **(kw or {}))
    holdout.receipts[c_id] = c
    holdout.trials[index] = trial.model_copy(update={"candidate_request_id": c_id})


def _with_execution(receipt: RetrievalReceipt, **changes) -> tuple[RetrievalReceipt, str]:
    execution = RetrievalExecution(
        parameters=changes.get("parameters", receipt.execution.parameters),
        features=changes.get("features", receipt.execution.features),
    )
    changed = receipt.model_copy(update={"execution": execution})
    return changed, sha256_hex(receipt_bytes(changed))


def test_receipt_reused_across_trials_raises(holdout):
    second = holdout.trials[1]
    holdout.trials[1] = second.model_copy(update={"candidate_request_id": holdout.trials[0].candidate_request_id})
    with pytest.raises(HoldoutIntegrityError, match="more than one full retrieval trial"):
        _evaluate(holdout)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"owner": "bob"}, "another owner"),
        ({"scopes": ["personal"]}, "scopes"),
        ({"reference_time": NOW + timedelta(days=1)}, "reference_time"),
        ({"limit": 10}, "result_limit"),
        ({"event_time_from": NOW - timedelta(days=365)}, "event_time_from"),
        ({"include_cross_scope": True}, "include_cross_scope"),
    ],
)
def test_candidate_arm_run_with_a_different_request_raises(lab, holdout, kw, match):
    _replace_candidate(lab, holdout, kw=kw)
    with pytest.raises(HoldoutIntegrityError, match=match):
        _evaluate(holdout)


def test_candidate_arm_run_with_a_different_query_raises(lab, holdout):
    _replace_candidate(lab, holdout, query="glacier repair workshop costs")
    with pytest.raises(HoldoutIntegrityError, match="different .*queries"):
        _evaluate(holdout)


def test_same_query_in_other_case_and_spacing_is_a_valid_pair(lab, holdout):
    query = holdout.receipts[holdout.trials[0].baseline_request_id][0].query
    _replace_candidate(lab, holdout, query=f"  {query.upper()} ")
    assert _evaluate(holdout).decision == "improved_full_retrieval"


def test_candidate_arm_with_different_features_raises(holdout):
    trial = holdout.trials[0]
    receipt = holdout.receipts[trial.candidate_request_id][0]
    holdout.receipts[trial.candidate_request_id] = _with_execution(
        receipt, features={**receipt.execution.features, "python": "0.0.0"}
    )
    with pytest.raises(HoldoutIntegrityError, match="execution.features"):
        _evaluate(holdout)


def test_baseline_multipliers_other_than_those_recorded_raise(holdout):
    with pytest.raises(HoldoutIntegrityError, match="baseline_multipliers"):
        _evaluate(holdout, baseline_multipliers={"semantic": 2.0})


def test_candidate_multipliers_other_than_those_recorded_raise(holdout):
    with pytest.raises(HoldoutIntegrityError, match="candidate_multipliers"):
        _evaluate(holdout, candidate_multipliers={"lexical": 2.0})


def test_candidate_arm_run_with_other_multipliers_raises(lab, holdout):
    _replace_candidate(lab, holdout, multipliers={"lexical": 3.0})
    with pytest.raises(HoldoutIntegrityError, match="candidate_multipliers"):
        _evaluate(holdout)


def test_missing_receipt_raises(holdout):
    del holdout.receipts[holdout.trials[3].candidate_request_id]
    with pytest.raises(ReceiptNotFound, match="missing candidate receipt"):
        _evaluate(holdout)


def test_receipt_with_a_wrong_checksum_raises(holdout):
    request_id = holdout.trials[0].baseline_request_id
    holdout.receipts[request_id] = (holdout.receipts[request_id][0], sha256_hex("not this receipt"))
    with pytest.raises(HoldoutIntegrityError, match="checksum"):
        _evaluate(holdout)


def test_receipts_before_schema_version_3_raise():
    receipt = RetrievalReceipt.model_validate_json((FIXTURES / "receipt-v2.json").read_bytes())
    twin = receipt.model_copy(update={"request_id": uuid.uuid4()})
    receipts = {r.request_id: (r, sha256_hex(receipt_bytes(r))) for r in (receipt, twin)}
    trial = FullRetrievalTrial(
        group_id="g",
        baseline_request_id=receipt.request_id,
        candidate_request_id=twin.request_id,
        relevant_node_ids=[uuid.uuid4()],
    )
    with pytest.raises(HoldoutIntegrityError, match="schema version 2"):
        _evaluate(
            Holdout(receipts, [trial]), owner=receipt.owner, scopes=list(receipt.scopes), candidate_multipliers=UNITY
        )


def test_repeated_normalized_query_in_different_groups_raises(lab, holdout):
    query = _questions("kyoto")[0]
    holdout.trials.append(_pair(lab, holdout, query, "kyoto", group="first"))
    holdout.trials.append(_pair(lab, holdout, f"  {query.upper()}  ", "kyoto", group="second"))
    with pytest.raises(HoldoutIntegrityError, match="different groups"):
        _evaluate(holdout)


def test_mixed_base_scoring_raises(lab, holdout):
    scoring = {"semantic": 0.3, "lexical": 0.15}
    holdout.trials.append(
        _pair(lab, holdout, _questions("canoe")[0], "canoe", base_kw={"scoring": scoring}, cand_kw={"scoring": scoring})
    )
    with pytest.raises(HoldoutIntegrityError, match="one base scoring"):
        _evaluate(holdout)


def test_evaluation_for_another_scope_set_raises(holdout):
    with pytest.raises(HoldoutIntegrityError, match="scopes"):
        _evaluate(holdout, scopes=["personal", "project"])


@pytest.mark.parametrize("field", ["proposal_input_checksum", "memory_artifact_sha256"])
@pytest.mark.parametrize("value", ["", "xyz", "A" * 64, "a" * 63, None])
def test_malformed_digests_raise(holdout, field, value):
    with pytest.raises(InvalidInput, match=f"{field}.*SHA-256"):
        _evaluate(holdout, **{field: value})


def test_an_empty_holdout_raises(holdout):
    with pytest.raises(InvalidInput, match="trials"):
        _evaluate(Holdout(holdout.receipts, []))


@pytest.mark.parametrize(
    "trial, match",
    [
        ({"group_id": "  ", "relevant_node_ids": [uuid.uuid4()]}, "blank"),
        ({"group_id": "g", "relevant_node_ids": []}, "relevant_node_ids"),
        ({"group_id": "g", "relevant_node_ids": [uuid.UUID(int=1)] * 2}, "unique"),
        ({"group_id": "g", "relevant_node_ids": [uuid.uuid4()], "same_ids": True}, "different retrievals"),
    ],
)
def test_malformed_trials_raise(trial, match):
    base = uuid.uuid4()
    data = {
        "group_id": trial["group_id"],
        "relevant_node_ids": trial["relevant_node_ids"],
        "baseline_request_id": base,
        "candidate_request_id": base if trial.get("same_ids") else uuid.uuid4(),
    }
    with pytest.raises(ValidationError, match=match):
        FullRetrievalTrial(**data)
