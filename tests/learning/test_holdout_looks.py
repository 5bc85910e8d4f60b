"""Holdout looks (both backends): the store numbers every look at a partition's holdout, the
same evaluation repeated is the same look, and a profile needs its holdout's recorded look."""

from __future__ import annotations

import threading
import uuid

import pytest

from prme_core.errors import CorruptRecord, InvalidEvidence
from prme_core.learning.full_retrieval import evaluate_full_retrieval
from prme_core.learning.looks import OP_LOOK, LookKey, experiment_key, get_look, record_look
from prme_core.learning.reports import record_report
from prme_core.receipts.store import get_receipts
from prme_core.retrieval.multipliers import RankingMultipliers
from tests.learning_lab import HOLDOUT_CONFIG, LAB_OWNER, LAB_SCOPES, LEARNING_CONFIG, build_lab
from tests.tampering import tamper

OWNER, SCOPES = "alice", ("personal",)
CHECKSUM = "ab" * 32
MEMORY = "cd" * 32


def _look(client, *, lexical=2.0, baseline=None, owner=OWNER, groups=("g1", "g2")):
    key = LookKey(owner, SCOPES, baseline, CHECKSUM, RankingMultipliers(lexical=lexical), MEMORY, tuple(groups))
    return record_look(client.store, key)


def _outside(client, proposal, trials, memory, **kw):
    """The pure evaluation of stored paired receipts, not through the store (no look recorded)."""
    ids = [r for t in trials for r in (t.baseline_request_id, t.candidate_request_id)]
    return evaluate_full_retrieval(
        get_receipts(client.store, LAB_OWNER, ids),
        trials,
        owner=LAB_OWNER,
        scopes=LAB_SCOPES,
        proposal_input_checksum=proposal.input_checksum,
        memory_artifact_sha256=memory,
        candidate_multipliers=proposal.multipliers,
        config=HOLDOUT_CONFIG,
        **kw,
    )


def test_looks_are_numbered_in_order_per_scope_set_and_baseline(client):
    first, second = _look(client, lexical=2.0), _look(client, lexical=3.0)
    assert (first.look, second.look) == (1, 2)
    other_baseline = _look(client, lexical=2.0, baseline=uuid.uuid4())
    assert other_baseline.look == 1  # a new baseline is a new experiment with its own budget
    assert _look(client, owner="bob").look == 1  # owners never share a count


def test_the_identical_evaluation_again_is_the_same_look_and_spends_nothing(client):
    first = _look(client, groups=("g2", "g1"))
    again = _look(client, groups=("g1", "g2", "g1"))
    assert again == first and _look(client, lexical=3.0).look == 2


def test_a_look_reads_back_verified_and_only_for_its_owner(client):
    look = _look(client)
    assert get_look(client.store, OWNER, look.look_id) == look
    assert get_look(client.store, "bob", look.look_id) is None
    assert get_look(client.store, OWNER, uuid.uuid4()) is None
    with client.store.transaction(read_only=True) as tx:
        newest = tx.latest_operation(OWNER, OP_LOOK, experiment_key(SCOPES, None))
    assert newest is not None and newest.id == str(look.look_id)


def test_concurrent_looks_get_distinct_numbers(client):
    numbers, errors = [], []

    def one(factor):
        try:
            numbers.append(_look(client, lexical=factor).look)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(1.5 + i / 10,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sorted(numbers) == [1, 2, 3, 4, 5, 6]


def test_a_tampered_look_fails_closed(client):
    look = _look(client)
    tamper(
        client.store,
        "UPDATE operations SET payload = replace(payload, '\"look\":1', '\"look\":7') WHERE id = ?",
        [str(look.look_id)],
    )
    with pytest.raises(CorruptRecord):
        get_look(client.store, OWNER, look.look_id)


def test_a_profile_needs_the_store_s_record_of_its_holdout_look(client):
    build_lab(client)
    proposal = client.evaluate_learning(LAB_OWNER, scopes=LAB_SCOPES, config=LEARNING_CONFIG)
    holdout = client.evaluate_holdout(proposal, config=HOLDOUT_CONFIG)
    assert proposal.decision == "improved_on_observed_candidates"
    assert holdout.decision == "improved_full_retrieval" and holdout.config.look == 1
    assert holdout.config.max_p_value == pytest.approx(0.025) and holdout.schema_version == 4
    # the same evaluation again (fresh paired retrievals, same memory) is the same look
    again = client.evaluate_holdout(proposal, config=HOLDOUT_CONFIG)
    assert (again.config.look, again.decision, again.ndcg_gain) == (1, holdout.decision, holdout.ndcg_gain)
    # a self-consistent report of the same trials that claims another look than the store recorded
    claimed = _outside(client, proposal, holdout.trials, holdout.memory_artifact_sha256, look=2)
    assert claimed.config.look == 2 and claimed.config.max_p_value == pytest.approx(0.05 / 6)
    with pytest.raises(InvalidEvidence, match="not a report this store produced"):
        client.create_ranking_profile(proposal, claimed, owner=LAB_OWNER)
    record_report(client.store, claimed)  # even kept as evidence by hand, its look is not the store's
    with pytest.raises(InvalidEvidence, match="claims look 2"):
        client.create_ranking_profile(proposal, claimed, owner=LAB_OWNER)
    profile = client.create_ranking_profile(proposal, holdout, owner=LAB_OWNER)
    assert profile.holdout.config.look == 1


def test_a_holdout_evaluated_outside_the_store_cannot_make_a_profile(client):
    build_lab(client)
    proposal = client.evaluate_learning(LAB_OWNER, scopes=LAB_SCOPES, config=LEARNING_CONFIG)
    run = client.run_holdout(
        LAB_OWNER,
        LAB_SCOPES,
        candidate_multipliers=proposal.multipliers,
        excluded_query_digests=proposal.query_digests(),
    )
    outside = _outside(client, proposal, run.trials, run.memory_artifact_sha256)
    assert outside.decision == "improved_full_retrieval"
    with pytest.raises(InvalidEvidence, match="not a report this store produced"):
        client.create_ranking_profile(proposal, outside, owner=LAB_OWNER)
    record_report(client.store, outside)  # kept by hand: the holdout's look is still not the store's
    with pytest.raises(InvalidEvidence, match="not recorded in this store"):
        client.create_ranking_profile(proposal, outside, owner=LAB_OWNER)
    assert client.list_ranking_profiles(LAB_OWNER) == []
