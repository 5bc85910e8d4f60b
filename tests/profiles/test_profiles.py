"""Ranking profiles on both backends: creation rules, the scoped pointer, resolution, end to end."""

import json
import multiprocessing
import os
import threading
import uuid
from datetime import timedelta

import psycopg
import pytest

from prme_core import MemoryClient
from prme_core.canonical import canonical_json
from prme_core.errors import (
    IdempotencyConflict,
    InvalidInput,
    NoOpTransition,
    ProfileInapplicable,
    ProfileNotFound,
    ReactivationRefused,
    StaleProfileError,
)
from prme_core.learning.full_retrieval import FullRetrievalTrial, evaluate_full_retrieval
from prme_core.learning.looks import LookKey, record_look
from prme_core.learning.reports import record_report
from prme_core.profiles.registry import rebuild_pointer_head
from prme_core.receipts.projection import scope_key
from prme_core.retrieval.embedding import HashedEmbedding
from prme_core.retrieval.multipliers import UNITY
from prme_core.storage.keyed_records import record_operation_id
from tests.conftest import POSTGRES_ENV, _postgres_dsn, _with_schema
from tests.learning_lab import HOLDOUT_CONFIG, LEARNING_CONFIG, NOW, SUBJECTS, build_lab, holdout_question
from tests.tampering import tamper

OWNER, SCOPES = "alice", ["personal"]


def _module_url(backend, tmp_path_factory):
    if backend == "duckdb":
        return f"duckdb:///{tmp_path_factory.mktemp('evidence') / 'lab.duckdb'}", None
    schema = f"t_{uuid.uuid4().hex[:16]}"
    return _with_schema(_postgres_dsn(), schema), schema


def _forced_holdout(client, proposal, baseline):
    """A holdout where the candidate arm wins by construction (relevant := its top result where
    the arms differ): for testing profile chains, not retrieval quality."""
    receipts, trials = {}, []
    for topic in SUBJECTS[:18]:
        arms = []
        for multipliers in (baseline, proposal.multipliers):
            r = client.retrieve(
                f"something about the {topic} workshop dollars",
                owner=OWNER,
                scopes=SCOPES,
                reference_time=NOW,
                limit=10,
                ranking_multipliers=multipliers,
            )
            receipts[r.metadata.request_id] = (r.receipt, r.metadata.receipt_checksum)
            arms.append(r)
        base_pos = {c.node_id: i for i, c in enumerate(arms[0].receipt.candidates)}
        gains = [(base_pos.get(c.node_id, 99) - i, c.node_id) for i, c in enumerate(arms[1].receipt.candidates)]
        gain, winner = max(gains, key=lambda g: (g[0], str(g[1])))
        if gain > 0:  # the candidate ranks this node higher than the baseline does
            trials.append(
                FullRetrievalTrial(
                    group_id=topic,
                    baseline_request_id=arms[0].metadata.request_id,
                    candidate_request_id=arms[1].metadata.request_id,
                    relevant_node_ids=(winner,),
                )
            )
    return evaluate_full_retrieval(
        receipts,
        trials,
        owner=OWNER,
        scopes=SCOPES,
        proposal_input_checksum=proposal.input_checksum,
        memory_artifact_sha256=client.memory_artifact_digest(OWNER),
        candidate_multipliers=proposal.multipliers,
        baseline_multipliers=baseline,
        config={"min_query_groups": 5, "max_regression_fraction": 1.0},
    )


def _create(client, proposal, holdout, **kw):
    """``create_ranking_profile`` in a store other than the one that evaluated the holdout: the
    evidence was computed once per backend (the ``evidence`` fixture), so this store first
    records the holdout's look and both reports as its own evaluations would have."""
    record_look(client.store, LookKey.of(holdout, kw.get("baseline_profile_id")))
    for report in (proposal, holdout):  # the reports, as this store would have kept them
        record_report(client.store, report)
    return client.create_ranking_profile(proposal, holdout, **kw)


def _profile(client, evidence, **kw):
    """A profile of OWNER from the ``evidence`` fixture's passing proposal and holdout."""
    _, proposal, holdout, *_ = evidence
    return _create(client, proposal, holdout, owner=OWNER, **kw)


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def evidence(request, tmp_path_factory):
    """(backend, proposal, holdout, weaker proposal): real reports, computed once per backend."""
    url, schema = _module_url(request.param, tmp_path_factory)
    try:
        with MemoryClient(url) as client:
            build_lab(client)
            proposal = client.evaluate_learning(OWNER, scopes=SCOPES, config=LEARNING_CONFIG)
            holdout = client.evaluate_holdout(proposal, config=HOLDOUT_CONFIG)
            weaker = client.evaluate_learning(
                OWNER, scopes=SCOPES, config={**LEARNING_CONFIG, "fit": "judged_pairwise", "passes_per_step": 1}
            )
            assert (
                proposal.decision == "improved_on_observed_candidates" and holdout.decision == "improved_full_retrieval"
            )
            assert weaker.decision == "improved_on_observed_candidates" and weaker.multipliers != proposal.multipliers
            chained = _forced_holdout(client, weaker, proposal.multipliers)
            assert chained.decision == "improved_full_retrieval"
        yield request.param, proposal, holdout, weaker, chained
    finally:
        if schema:
            with psycopg.connect(os.environ[POSTGRES_ENV], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def fresh(evidence, tmp_path):
    """A fresh store on the evidence's backend, with a few memories to retrieve."""
    backend = evidence[0]
    if backend == "duckdb":
        url, schema = f"duckdb:///{tmp_path / 'fresh.duckdb'}", None
    else:
        schema = f"t_{uuid.uuid4().hex[:16]}"
        url = _with_schema(_postgres_dsn(), schema)
    client = MemoryClient(url)
    client.store_batch(OWNER, ["The cat repair costs forty dollars at the cat workshop", "Alice said a cat once"])
    client.store_batch(OWNER, [{"content": "Project cat repair budget", "scope": "project"}])
    yield client, url
    client.close()
    if schema:
        with psycopg.connect(os.environ[POSTGRES_ENV], autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _retrieve(client, scopes=SCOPES, **kw):
    return client.retrieve("how much is the cat repair", owner=OWNER, scopes=scopes, reference_time=NOW, **kw)


# --- creation --------------------------------------------------------------------------------


def test_a_profile_persists_its_complete_evidence_and_an_exact_retry_returns_the_first(fresh, evidence):
    client, url = fresh
    _, proposal, holdout, *_ = evidence
    pid = uuid.uuid4()
    first = _create(client, proposal, holdout, owner=OWNER, profile_id=pid)
    again = _create(client, proposal, holdout, owner=OWNER, profile_id=pid)
    assert again == first and again.created_at == first.created_at
    assert first.proposal == proposal and first.holdout == holdout and first.multipliers == proposal.multipliers
    with MemoryClient(url) as reopened:
        status = reopened.get_ranking_profile(pid, OWNER)
        assert status.profile == first and status.active is False and status.latest_change is None
    assert client.get_ranking_profile(pid, "mallory") is None


def test_a_conflicting_reuse_of_a_profile_id_fails(fresh, evidence):
    client, _ = fresh
    _, proposal, holdout, weaker, chained = evidence
    pid = uuid.uuid4()
    base = _create(client, proposal, holdout, owner=OWNER, profile_id=pid)
    other = _create(client, proposal, holdout, owner=OWNER)
    with pytest.raises(IdempotencyConflict, match="different ranking profile"):
        _create(client, weaker, chained, owner=OWNER, profile_id=pid, baseline_profile_id=other.profile_id)
    assert client.get_ranking_profile(pid, OWNER).profile == base


def test_creation_needs_two_positive_reports_bound_to_the_same_evidence(fresh, evidence):
    client, _ = fresh
    _, proposal, holdout, weaker, chained = evidence
    cases = {
        "learning decision does not match": (proposal.model_copy(update={"decision": "no_improvement"}), holdout),
        "decision .*does not match|holdout decided": (
            proposal,
            holdout.model_copy(update={"decision": "no_improvement"}),
        ),
        "multipliers must be identical": (weaker, holdout),
        "input_checksum|owner": (proposal.model_copy(update={"owner": "bob"}), holdout),
        "input_checksum|scope set": (proposal.model_copy(update={"scopes": ("project",)}), holdout),
        "multipliers": (proposal.model_copy(update={"multipliers": UNITY}), holdout),
        "baseline_profile_id": (weaker, chained),
    }
    for needle, (p, h) in cases.items():
        with pytest.raises(InvalidInput, match=needle):
            _create(client, p, h, owner=OWNER)
    with pytest.raises(ProfileNotFound, match="baseline"):
        _create(client, weaker, chained, owner=OWNER, baseline_profile_id=uuid.uuid4())
    assert client.list_ranking_profiles(OWNER) == []


def test_a_chained_profile_names_the_profile_its_holdout_baseline_used(fresh, evidence):
    client, _ = fresh
    _, proposal, holdout, weaker, chained = evidence
    first = _create(client, proposal, holdout, owner=OWNER)
    second = _create(client, weaker, chained, owner=OWNER, baseline_profile_id=first.profile_id)
    assert second.baseline_profile_id == first.profile_id
    with pytest.raises(StaleProfileError, match="re-inspect"):
        client.activate_ranking_profile(second.profile_id, owner=OWNER)
    client.activate_ranking_profile(first.profile_id, owner=OWNER)
    state = client.activate_ranking_profile(second.profile_id, owner=OWNER)
    assert (state.previous_profile_id, state.active_profile_id) == (first.profile_id, second.profile_id)


# --- the pointer -----------------------------------------------------------------------------


def test_activation_over_a_stale_baseline_fails(fresh, evidence):
    client, _ = fresh
    a = _profile(client, evidence)
    b = _profile(client, evidence)
    client.activate_ranking_profile(a.profile_id, owner=OWNER)
    with pytest.raises(StaleProfileError):
        client.activate_ranking_profile(b.profile_id, owner=OWNER)
    assert client.get_active_ranking_profile(OWNER, SCOPES) == a
    assert len(client.ranking_profile_history(OWNER, SCOPES)) == 1


def test_activation_retries_are_idempotent_across_restart_and_change_ids_cannot_be_reused(fresh, evidence):
    client, url = fresh
    profile = _profile(client, evidence)
    change = uuid.uuid4()
    first = client.activate_ranking_profile(profile.profile_id, owner=OWNER, change_id=change)
    assert not first.replayed
    with MemoryClient(url) as reopened:
        again = reopened.activate_ranking_profile(profile.profile_id, owner=OWNER, change_id=change)
        assert again.replayed and again.superseded_by is None and again.canonical_bytes() == first.canonical_bytes()
        with pytest.raises(IdempotencyConflict, match="different ranking profile transition"):
            reopened.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES, change_id=change)
        assert reopened.get_active_ranking_profile(OWNER, SCOPES) == profile
    assert len(client.ranking_profile_history(OWNER, SCOPES)) == 1


def test_an_activation_retry_after_a_deactivation_returns_the_earlier_record_marked_superseded(fresh, evidence):
    client, _ = fresh
    profile = _profile(client, evidence)
    change = uuid.uuid4()
    first = client.activate_ranking_profile(profile.profile_id, owner=OWNER, change_id=change)
    off = client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES)
    retry = client.activate_ranking_profile(profile.profile_id, owner=OWNER, change_id=change)
    assert retry.replayed and retry.change_id == first.change_id and retry.changed_at == first.changed_at
    assert retry.superseded_by == off and retry.superseded_by.active_profile_id is None
    assert client.get_active_ranking_profile(OWNER, SCOPES) is None
    assert [s.action for s in client.ranking_profile_history(OWNER, SCOPES)] == ["deactivate", "activate"]


def test_an_orchestrated_activation_never_undoes_a_deactivation_or_rollback(fresh, evidence):
    client, _ = fresh
    _, proposal, holdout, weaker, chained = evidence
    a = _create(client, proposal, holdout, owner=OWNER)
    b = _create(client, weaker, chained, owner=OWNER, baseline_profile_id=a.profile_id)
    change = uuid.uuid4()
    client.activate_ranking_profile(a.profile_id, owner=OWNER, change_id=change, reactivate=False)
    client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES)
    for retry_id in (change, uuid.uuid4()):  # the same decision retried, or a fresh attempt
        with pytest.raises(ReactivationRefused, match="rollback_profile_job with profile_id"):
            client.activate_ranking_profile(a.profile_id, owner=OWNER, change_id=retry_id, reactivate=False)
    assert client.get_active_ranking_profile(OWNER, SCOPES) is None
    client.rollback_ranking_profile(a.profile_id, owner=OWNER, scopes=SCOPES)  # the operator brings it back
    again = client.activate_ranking_profile(a.profile_id, owner=OWNER, change_id=change, reactivate=False)
    assert again.replayed and again.superseded_by.action == "rollback"
    assert again.superseded_by.active_profile_id == a.profile_id
    client.activate_ranking_profile(b.profile_id, owner=OWNER, reactivate=False)
    client.rollback_ranking_profile(a.profile_id, owner=OWNER, scopes=SCOPES)  # b rolled back away
    with pytest.raises(ReactivationRefused, match="rollback change"):
        client.activate_ranking_profile(b.profile_id, owner=OWNER, reactivate=False)
    assert client.get_active_ranking_profile(OWNER, SCOPES) == a
    assert len(client.ranking_profile_history(OWNER, SCOPES)) == 5


def test_concurrent_activations_from_one_baseline_let_exactly_one_win_on_duckdb(fresh, evidence):
    client, _ = fresh
    if evidence[0] != "duckdb":
        pytest.skip("threads against one embedded store; PostgreSQL uses processes (next test)")
    ids = [_profile(client, evidence).profile_id for _ in range(8)]
    outcomes = []

    def worker(pid):
        try:
            client.activate_ranking_profile(pid, owner=OWNER)
            outcomes.append("won")
        except StaleProfileError:
            outcomes.append("stale")

    threads = [threading.Thread(target=worker, args=(pid,)) for pid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["stale"] * 7 + ["won"]
    assert len(client.ranking_profile_history(OWNER, SCOPES)) == 1


def _activate_in_process(url, pid, queue):
    try:
        with MemoryClient(url) as c:
            c.activate_ranking_profile(pid, owner=OWNER)
        queue.put("won")
    except StaleProfileError:
        queue.put("stale")
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        queue.put(f"error: {exc!r}")


def test_concurrent_activations_from_one_baseline_let_exactly_one_win_on_postgres(fresh, evidence):
    client, url = fresh
    if evidence[0] != "postgres":
        pytest.skip("processes against one PostgreSQL server; DuckDB uses threads (previous test)")
    ids = [str(_profile(client, evidence).profile_id) for _ in range(8)]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_activate_in_process, args=(url, pid, queue)) for pid in ids]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    outcomes = sorted(queue.get(timeout=10) for _ in procs)
    assert outcomes == ["stale"] * 7 + ["won"], outcomes
    assert len(client.ranking_profile_history(OWNER, SCOPES)) == 1


def test_rollback_and_deactivate_are_recorded_states_and_no_ops_are_rejected(fresh, evidence):
    client, url = fresh
    _, proposal, holdout, weaker, chained = evidence
    assert client.ranking_profile_history(OWNER, SCOPES) == []  # never activated: no state at all
    with pytest.raises(NoOpTransition):
        client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES)
    a = _create(client, proposal, holdout, owner=OWNER)
    b = _create(client, weaker, chained, owner=OWNER, baseline_profile_id=a.profile_id)
    client.activate_ranking_profile(a.profile_id, owner=OWNER)
    client.activate_ranking_profile(b.profile_id, owner=OWNER)
    with pytest.raises(NoOpTransition):
        client.rollback_ranking_profile(b.profile_id, owner=OWNER, scopes=SCOPES)
    back = client.rollback_ranking_profile(a.profile_id, owner=OWNER, scopes=SCOPES)
    assert (back.action, back.previous_profile_id, back.active_profile_id) == ("rollback", b.profile_id, a.profile_id)
    with pytest.raises(StaleProfileError):
        client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES, expected_profile_id=b.profile_id)
    off = client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES, expected_profile_id=a.profile_id)
    assert off.active_profile_id is None and off.application is None
    base = client.rollback_ranking_profile(b.profile_id, owner=OWNER, scopes=SCOPES)
    to_base = client.rollback_ranking_profile(None, owner=OWNER, scopes=SCOPES)
    assert to_base.active_profile_id is None and base.active_profile_id == b.profile_id
    actions = [s.action for s in client.ranking_profile_history(OWNER, SCOPES)]
    assert actions == ["rollback", "rollback", "deactivate", "rollback", "activate", "activate"]
    with MemoryClient(url) as reopened:  # the pointer survives restart
        assert reopened.get_active_ranking_profile(OWNER, SCOPES) is None
        assert [s.action for s in reopened.ranking_profile_history(OWNER, SCOPES, limit=2)] == ["rollback", "rollback"]


def test_the_as_of_query_answers_from_the_history(fresh, evidence):
    client, _ = fresh
    _, proposal, holdout, weaker, chained = evidence
    a = _create(client, proposal, holdout, owner=OWNER)
    b = _create(client, weaker, chained, owner=OWNER, baseline_profile_id=a.profile_id)
    s1 = client.activate_ranking_profile(a.profile_id, owner=OWNER)
    s2 = client.activate_ranking_profile(b.profile_id, owner=OWNER)
    s3 = client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES)
    s4 = client.rollback_ranking_profile(a.profile_id, owner=OWNER, scopes=SCOPES)
    assert client.ranking_profile_at(OWNER, SCOPES, s1.changed_at - timedelta(seconds=1)) is None
    for state in (s1, s2, s3, s4):
        assert client.ranking_profile_at(OWNER, SCOPES, state.changed_at) == state
    assert client.ranking_profile_at(OWNER, SCOPES, s2.changed_at + (s3.changed_at - s2.changed_at) / 2) == s2
    page = client.ranking_profile_history(OWNER, SCOPES, limit=2)
    rest = client.ranking_profile_history(OWNER, SCOPES, before=page[-1].change_id)
    assert [s.change_id for s in page + rest] == [s4.change_id, s3.change_id, s2.change_id, s1.change_id]


# --- resolution at retrieval -----------------------------------------------------------------


def test_retrieval_resolves_the_scoped_pointer_request_locally(fresh, evidence):
    client, _ = fresh
    settings_before = client.settings.canonical_bytes()
    assert _retrieve(client).metadata.ranking_profile_status == "none"
    profile = _profile(client, evidence)
    client.activate_ranking_profile(profile.profile_id, owner=OWNER)
    applied = _retrieve(client)
    meta = applied.metadata
    assert (meta.ranking_profile_status, meta.ranking_profile_id, meta.ranking_profile_reason) == (
        "applied",
        profile.profile_id,
        None,
    )
    assert meta.ranking_multipliers == profile.multipliers.model_dump()
    assert applied.receipt.execution.parameters["ranking_profile"] == {
        "status": "applied",
        "profile_id": str(profile.profile_id),
    }
    assert applied.receipt.weight_sets[0] != applied.receipt.scoring
    applied.receipt.validate()
    override = _retrieve(client, ranking_multipliers={})
    assert (override.metadata.ranking_profile_status, override.metadata.ranking_profile_reason) == (
        "request_override",
        "explicit_multipliers",
    )
    changed = _retrieve(client, scoring={"semantic": 0.30, "lexical": 0.15})
    assert (changed.metadata.ranking_profile_status, changed.metadata.ranking_profile_reason) == (
        "inapplicable",
        "base_scoring_mismatch",
    )
    assert changed.metadata.ranking_multipliers is None and changed.receipt.weight_sets[0] == changed.receipt.scoring
    assert _retrieve(client, scopes=["project"]).metadata.ranking_profile_status == "none"
    assert _retrieve(client, scopes=["personal", "project"]).metadata.ranking_profile_status == "none"
    assert client.settings.canonical_bytes() == settings_before
    client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES)
    after = _retrieve(client)
    assert after.metadata.ranking_profile_status == "none" and after.receipt.weight_sets[0] == after.receipt.scoring


def test_a_changed_feature_identity_makes_a_profile_inapplicable(fresh, evidence):
    client, url = fresh
    profile = _profile(client, evidence)
    with MemoryClient(url, embedder=HashedEmbedding(dimension=256)) as other:
        with pytest.raises(ProfileInapplicable, match="feature_identity_mismatch"):
            other.activate_ranking_profile(profile.profile_id, owner=OWNER)
        client.activate_ranking_profile(profile.profile_id, owner=OWNER)
        seen = other.retrieve("cat repair", owner=OWNER, scopes=SCOPES, reference_time=NOW).metadata
        assert (seen.ranking_profile_status, seen.ranking_profile_reason) == (
            "inapplicable",
            "feature_identity_mismatch",
        )


def _tamper(client, sql, params):
    tamper(client.store, sql, params)


def _assert_base_scoring(response, base, reason):
    meta = response.metadata
    assert (meta.ranking_profile_status, meta.ranking_profile_reason, meta.ranking_profile_id) == (
        "inapplicable",
        reason,
        None,
    )
    assert meta.ranking_multipliers is None and response.receipt.weight_sets[0] == response.receipt.scoring
    assert [(c.node_id, c.score) for c in response.receipt.candidates] == [
        (c.node_id, c.score) for c in base.receipt.candidates
    ]
    assert [r.node_id for r in response.results] == [r.node_id for r in base.results]


def test_retrieval_never_applies_a_pointer_change_that_fails_its_checksum(fresh, evidence):
    client, _ = fresh
    base = _retrieve(client)
    assert base.metadata.ranking_profile_status == "none"
    profile = _profile(client, evidence)
    state = client.activate_ranking_profile(profile.profile_id, owner=OWNER)
    assert _retrieve(client).metadata.ranking_profile_status == "applied"
    forged = json.loads(state.canonical_bytes())
    forged["application"]["multipliers"] = {**forged["application"]["multipliers"], "lexical": 4.0, "semantic": 0.25}
    _tamper(
        client,
        "UPDATE operations SET payload = ? WHERE id = ?",
        [canonical_json(forged).decode(), record_operation_id("ranking-profile-state", OWNER, state.change_id)],
    )
    _assert_base_scoring(_retrieve(client), base, "pointer_record_corrupt")


def test_retrieval_fails_closed_when_the_pointer_head_disagrees_with_the_log(fresh, evidence):
    client, _ = fresh
    base = _retrieve(client)
    profile = _profile(client, evidence)
    client.activate_ranking_profile(profile.profile_id, owner=OWNER)
    head_sql = "FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ?"
    key = [OWNER, scope_key(tuple(SCOPES))]
    with client.store.transaction() as tx:
        older_head = tx.conn.fetchall(f"SELECT op_id, op_seq, payload, checksum {head_sql}", key)[0]
    client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES)
    assert _retrieve(client).metadata.ranking_profile_status == "none"
    _tamper(
        client,
        "UPDATE ranking_pointer_heads SET op_id = ?, op_seq = ?, payload = ?, checksum = ? "
        "WHERE owner = ? AND scope_key = ?",
        [*older_head, *key],
    )  # a genuine, older head row put back
    _assert_base_scoring(_retrieve(client), base, "pointer_head_stale")
    _tamper(client, f"DELETE {head_sql}", key)
    _assert_base_scoring(_retrieve(client), base, "pointer_head_stale")
    assert rebuild_pointer_head(client.store, OWNER, SCOPES).action == "deactivate"
    assert _retrieve(client).metadata.ranking_profile_status == "none"


def test_the_whole_loop_from_python_ends_in_an_applied_profile_and_back(tmp_path):
    with MemoryClient(f"duckdb:///{tmp_path / 'e2e.duckdb'}") as client:
        build_lab(client)
        before = client.retrieve(holdout_question("violin"), owner=OWNER, scopes=SCOPES, reference_time=NOW)
        proposal = client.evaluate_learning(OWNER, scopes=SCOPES, config=LEARNING_CONFIG)
        assert proposal.decision == "improved_on_observed_candidates"
        holdout = client.evaluate_holdout(proposal, config=HOLDOUT_CONFIG)
        assert holdout.decision == "improved_full_retrieval"
        profile = _create(client, proposal, holdout, owner=OWNER)
        client.activate_ranking_profile(profile.profile_id, owner=OWNER)
        later = client.retrieve(holdout_question("violin"), owner=OWNER, scopes=SCOPES, reference_time=NOW)
        assert later.metadata.ranking_profile_status == "applied"
        assert later.receipt.execution.parameters["ranking_multipliers"] == profile.multipliers.model_dump()
        assert later.results[0].content.startswith("The violin repair")
        assert not before.results[0].content.startswith("The violin repair")
        client.deactivate_ranking_profile(owner=OWNER, scopes=SCOPES)
        base = client.retrieve(holdout_question("violin"), owner=OWNER, scopes=SCOPES, reference_time=NOW)
        assert base.metadata.ranking_profile_status == "none"
        assert [c.score for c in base.receipt.candidates] == [c.score for c in before.receipt.candidates]
