"""Relevance records, answer citations, context ablation and presence credit (both backends)."""

import threading
import uuid
from datetime import UTC, datetime

import pytest

from prme_core import MemoryClient
from prme_core.errors import IdempotencyConflict, InvalidInput, ReceiptNotFound
from prme_core.feedback.citations import OP_CITATIONS
from prme_core.feedback.relevance import OP_RELEVANCE
from prme_core.receipts.store import receipt_bytes
from prme_core.retrieval.tokenizer import count_tokens

NOW = datetime(2024, 6, 1, tzinfo=UTC)
FID = uuid.UUID("11111111-2222-3333-4444-555555555555")
LONG = " ".join(["plenty of words about the holiday in Kyoto with temples"] * 12)


def _ops(client: MemoryClient, op_type: str, owner: str = "alice") -> int:
    with client.store.transaction() as tx:
        return len(tx.list_operations(owner, op_type, limit=1000))


@pytest.fixture
def retrieval(client):
    client.store_batch(
        "alice",
        [
            "Alice: my cat is called Miso",
            "Bob: Miso is a lovely cat name",
            "Alice: Miso eats salmon every day",
            "Alice: the vet said Miso is healthy",
            "Alice: I also have a dog named Rex",
        ],
    )
    client.store_batch("bob", ["Bob: I have no cat"])
    response = client.retrieve("Miso cat", owner="alice", reference_time=NOW)
    return client, response


def _ids(response):
    return [r.node_id for r in response.results]


# --- relevance records ------------------------------------------------------------------------


def test_retry_with_same_feedback_id_returns_the_first_record(retrieval):
    client, response = retrieval
    labels = {_ids(response)[0]: True, _ids(response)[1]: False}
    first = client.record_relevance(
        response.metadata.request_id, labels, owner="alice", method="explicit_user", feedback_id=FID
    )
    again = client.record_relevance(
        response.metadata.request_id, dict(labels), owner="alice", method="explicit_user", feedback_id=str(FID)
    )
    assert again == first and again.recorded_at == first.recorded_at
    assert _ops(client, OP_RELEVANCE) == 1
    assert first.receipt_checksum == response.metadata.receipt_checksum
    assert client.get_relevance(FID, "alice") == first


@pytest.mark.parametrize("change", ["labels", "request", "surface", "method"])
def test_conflicting_reuse_of_a_feedback_id_fails_and_overwrites_nothing(retrieval, change):
    client, response = retrieval
    ids = _ids(response)
    first = client.record_relevance(
        response.metadata.request_id, {ids[0]: True}, owner="alice", method="explicit_user", feedback_id=FID
    )
    args = dict(
        request_id=response.metadata.request_id,
        labels={ids[0]: True},
        owner="alice",
        method="explicit_user",
        surface="results",
        feedback_id=FID,
    )
    if change == "labels":
        args["labels"] = {ids[0]: False}
    elif change == "request":
        args["request_id"] = client.retrieve("Miso cat", owner="alice", reference_time=NOW).metadata.request_id
    elif change == "surface":
        args["surface"] = "context"
    else:
        args["method"] = "structured_evaluation"
    with pytest.raises(IdempotencyConflict, match="different relevance judgment"):
        client.record_relevance(**args)
    assert client.get_relevance(FID, "alice") == first
    assert _ops(client, OP_RELEVANCE) == 1


def test_different_feedback_ids_keep_conflicting_judgments(retrieval):
    client, response = retrieval
    node = _ids(response)[0]
    client.record_relevance(response.metadata.request_id, {node: True}, owner="alice", method="explicit_user")
    client.record_relevance(response.metadata.request_id, {node: False}, owner="alice", method="explicit_user")
    assert sorted(r.labels[node] for r in client.list_relevance("alice")) == [False, True]


BAD_LABELS = [
    ("empty", {}, "labels"),
    ("non-boolean string", "yes", "labels"),
    ("integer value", 1, "labels"),
    ("not a node id", "not-a-uuid", "labels"),
]


@pytest.mark.parametrize("label,value,needle", BAD_LABELS, ids=[b[0] for b in BAD_LABELS])
def test_malformed_labels_are_rejected_and_write_nothing(retrieval, label, value, needle):
    client, response = retrieval
    labels = (
        {} if label == "empty" else ({"not-a-uuid": True} if label == "not a node id" else {_ids(response)[0]: value})
    )
    with pytest.raises(InvalidInput, match=needle):
        client.record_relevance(response.metadata.request_id, labels, owner="alice", method="explicit_user")
    assert _ops(client, OP_RELEVANCE) == 0


def test_labels_must_name_members_of_the_saved_response(retrieval):
    client, response = retrieval
    stranger = client.store_memory("alice", "Alice: unrelated memory about taxes").id
    with pytest.raises(InvalidInput, match="not a returned candidate"):
        client.record_relevance(response.metadata.request_id, {stranger: False}, owner="alice", method="explicit_user")
    for field, value in (("method", "vibes"), ("surface", "sidebar")):
        with pytest.raises(InvalidInput, match=field):
            client.record_relevance(
                response.metadata.request_id,
                {_ids(response)[0]: True},
                owner="alice",
                **{"method": "explicit_user", field: value},
            )
    assert _ops(client, OP_RELEVANCE) == 0


def test_feedback_on_a_missing_or_foreign_request_fails_and_writes_nothing(retrieval):
    client, response = retrieval
    with pytest.raises(ReceiptNotFound):
        client.record_relevance(
            response.metadata.request_id, {_ids(response)[0]: True}, owner="bob", method="explicit_user"
        )
    with pytest.raises(ReceiptNotFound):
        client.record_relevance(uuid.uuid4(), {_ids(response)[0]: True}, owner="alice", method="explicit_user")
    assert _ops(client, OP_RELEVANCE, "bob") == 0 and _ops(client, OP_RELEVANCE) == 0


def test_a_foreign_owner_can_neither_read_nor_take_over_a_feedback_id(retrieval):
    client, response = retrieval
    mine = client.record_relevance(
        response.metadata.request_id, {_ids(response)[0]: True}, owner="alice", method="explicit_user", feedback_id=FID
    )
    assert client.get_relevance(FID, "bob") is None and client.list_relevance("bob") == []
    bobs = client.retrieve("cat", owner="bob", reference_time=NOW)
    theirs = client.record_relevance(
        bobs.metadata.request_id, {bobs.results[0].node_id: False}, owner="bob", method="explicit_user", feedback_id=FID
    )
    assert theirs.owner == "bob" and client.get_relevance(FID, "alice") == mine


def _context_retrieval(client):
    client.store_batch("carol", [LONG + f" number {i}" for i in range(6)])
    return client.retrieve(
        "holiday Kyoto temples",
        owner="carol",
        reference_time=NOW,
        token_budget=320,
        min_fidelity="reference",
        packing={"multipath_ordering": "score"},
    )


def test_context_labels_need_included_entries_and_positive_labels_need_content(client):
    response = _context_retrieval(client)
    cands = response.receipt.candidates
    full = next(c for c in cands if c.has_content)
    reference = next(c for c in cands if c.in_context and not c.has_content)
    request = response.metadata.request_id
    assert (
        client.record_relevance(
            request, {full.node_id: True}, owner="carol", method="explicit_user", surface="context"
        ).surface
        == "context"
    )
    client.record_relevance(
        request, {reference.node_id: False}, owner="carol", method="explicit_user", surface="context"
    )
    with pytest.raises(InvalidInput, match="reference only"):
        client.record_relevance(
            request, {reference.node_id: True}, owner="carol", method="explicit_user", surface="context"
        )
    outside = [c for c in cands if not c.in_context]
    if outside:
        with pytest.raises(InvalidInput, match="not included"):
            client.record_relevance(
                request, {outside[0].node_id: False}, owner="carol", method="explicit_user", surface="context"
            )
    assert _ops(client, OP_RELEVANCE, "carol") == 2


def test_relevance_records_survive_restart_and_graph_changes(store_url):
    with MemoryClient(store_url) as first:
        nodes = first.store_batch("alice", ["Alice: cat Miso", "Alice: dog Rex"])
        response = first.retrieve("cat", owner="alice", reference_time=NOW)
        judgment = dict(
            request_id=response.metadata.request_id,
            labels={nodes[0].id: True},
            owner="alice",
            method="structured_evaluation",
            feedback_id=FID,
        )
        record = first.record_relevance(**judgment)
        first.archive("alice", nodes[0].id)
    with MemoryClient(store_url) as second:
        assert second.get_relevance(FID, "alice") == record
        again = second.record_relevance(**judgment)
        assert again == record


def test_list_relevance_pages_by_feedback_id_with_bounded_limits(retrieval):
    client, response = retrieval
    ids = sorted(uuid.uuid4() for _ in range(5))
    for fid in ids:
        client.record_relevance(
            response.metadata.request_id,
            {_ids(response)[0]: True},
            owner="alice",
            method="explicit_user",
            feedback_id=fid,
        )
    first = client.list_relevance("alice", limit=2)
    rest = client.list_relevance("alice", after=first[-1].feedback_id, limit=10)
    assert [r.feedback_id for r in first + rest] == ids
    for bad in (0, -1, True, 1001):
        with pytest.raises(InvalidInput, match="limit"):
            client.list_relevance("alice", limit=bad)


def test_concurrent_retries_of_one_feedback_id_produce_exactly_one_record(postgres_url):
    with MemoryClient(postgres_url) as client:
        client.store_batch("alice", ["Alice: cat Miso", "Alice: dog Rex"])
        response = client.retrieve("cat", owner="alice", reference_time=NOW)
        labels = {response.results[0].node_id: True}
        results, errors = [], []

        def worker():
            try:
                with MemoryClient(postgres_url) as own:
                    results.append(
                        own.record_relevance(
                            response.metadata.request_id, labels, owner="alice", method="explicit_user", feedback_id=FID
                        )
                    )
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and len(results) == 8
        assert len({r.recorded_at for r in results}) == 1
        assert _ops(client, OP_RELEVANCE) == 1


# --- answer citations -------------------------------------------------------------------------


def test_citations_are_idempotent_across_restart_and_conflicting_reuse_fails(store_url):
    cid = uuid.uuid4()
    with MemoryClient(store_url) as first:
        first.store_batch("alice", ["Alice: cat Miso", "Alice: dog Rex"])
        response = first.retrieve("cat dog", owner="alice", reference_time=NOW)
        citation = dict(
            owner="alice",
            answer_id="answer-1",
            cited_node_ids=[response.results[0].node_id],
            method="application_verified",
            citation_id=cid,
        )
        record = first.record_answer_citations(response.metadata.request_id, **citation)
        assert record.context_sha256 == response.receipt.context_sha256
        assert record.receipt_checksum == response.metadata.receipt_checksum
    with MemoryClient(store_url) as second:
        again = second.record_answer_citations(response.metadata.request_id, **citation)
        assert again == record
        for change in (
            {"answer_id": "answer-2"},
            {"cited_node_ids": []},
            {"method": "human_verified"},
            {"answer_digest": "a" * 64},
        ):
            with pytest.raises(IdempotencyConflict, match="different answer citation"):
                second.record_answer_citations(response.metadata.request_id, **{**citation, **change})
        assert second.get_answer_citations(cid, "alice") == record
        assert _ops(second, OP_CITATIONS) == 1


def test_an_empty_citation_set_is_a_valid_no_citations_record(retrieval):
    client, response = retrieval
    record = client.record_answer_citations(
        response.metadata.request_id, owner="alice", answer_id="a", cited_node_ids=[], method="model_reported"
    )
    assert record.cited_node_ids == ()


def test_citations_must_name_content_bearing_included_entries(client):
    response = _context_retrieval(client)
    reference = next(c for c in response.receipt.candidates if c.in_context and not c.has_content)
    stranger = client.store_memory("carol", "unrelated").id
    for bad in ([reference.node_id], [stranger]):
        with pytest.raises(InvalidInput, match="content-bearing"):
            client.record_answer_citations(
                response.metadata.request_id, owner="carol", answer_id="a", cited_node_ids=bad, method="model_reported"
            )
    assert _ops(client, OP_CITATIONS, "carol") == 0


@pytest.mark.parametrize(
    "overrides,needle",
    [
        ({"answer_id": "   "}, "answer_id"),
        ({"answer_id": "x" * 513}, "answer_id"),
        ({"answer_digest": "XYZ"}, "answer_digest"),
        ({"method": "guessed"}, "method"),
        ({"cited_node_ids": "one-id"}, "cited_node_ids"),
    ],
)
def test_malformed_citations_are_rejected_and_write_nothing(retrieval, overrides, needle):
    client, response = retrieval
    args = {**dict(owner="alice", answer_id="a", cited_node_ids=[], method="model_reported"), **overrides}
    with pytest.raises(InvalidInput, match=needle):
        client.record_answer_citations(response.metadata.request_id, **args)
    dup = response.results[0].node_id
    with pytest.raises(InvalidInput, match="unique"):
        client.record_answer_citations(
            response.metadata.request_id,
            owner="alice",
            answer_id="a",
            cited_node_ids=[dup, dup],
            method="model_reported",
        )
    assert _ops(client, OP_CITATIONS) == 0


def test_citations_after_the_cited_node_is_archived_still_validate(retrieval):
    client, response = retrieval
    node = next(c.node_id for c in response.receipt.candidates if c.has_content)
    client.archive("alice", node)
    record = client.record_answer_citations(
        response.metadata.request_id, owner="alice", answer_id="a", cited_node_ids=[node], method="human_verified"
    )
    assert client.get_answer_citations(record.citation_id, "alice") == record


def test_citations_are_read_only_through_their_owner_in_pages(retrieval):
    client, response = retrieval
    made = sorted(
        client.record_answer_citations(
            response.metadata.request_id, owner="alice", answer_id=f"a{i}", cited_node_ids=[], method="model_reported"
        ).citation_id
        for i in range(3)
    )
    assert client.list_answer_citations("bob") == [] and client.get_answer_citations(made[0], "bob") is None
    page = client.list_answer_citations("alice", limit=2)
    rest = client.list_answer_citations("alice", after=page[-1].citation_id)
    assert [r.citation_id for r in page + rest] == made


# --- ablation and presence credit -------------------------------------------------------------


def test_ablation_removes_only_the_target_and_keeps_every_retained_entry_byte_identical(retrieval):
    client, response = retrieval
    bundle = response.bundle
    before = bundle.model_dump_json()
    target = bundle.entries[1].node_id
    ablated = client.ablate_context(bundle, [str(target)])
    cf = ablated.counterfactual
    assert bundle.model_dump_json() == before  # input not mutated
    assert cf.included_ids() == tuple(e.node_id for e in bundle.entries if e.node_id != target)
    assert [e.text for e in cf.entries] == [e.text for e in bundle.entries if e.node_id != target]
    assert cf.header == bundle.header and cf.guidance == bundle.guidance
    assert target in cf.excluded_ids


def test_ablation_accounts_tokens_exactly_and_binds_both_hashes(retrieval):
    client, response = retrieval
    bundle = response.bundle
    target = bundle.entries[0]
    ablated = client.ablate_context(bundle, [target.node_id])
    cf = ablated.counterfactual
    assert ablated.baseline_context_sha256 == response.receipt.context_sha256 == bundle.context_sha256()
    assert ablated.counterfactual_context_sha256 == cf.context_sha256()
    assert cf.tokens_used == count_tokens(cf.render()) == bundle.tokens_used - target.token_cost
    assert ablated.removed_tokens == target.token_cost
    assert cf.tokens_used + cf.budget_remaining == bundle.tokens_used + bundle.budget_remaining
    assert len(cf.entries) == len(bundle.entries) - 1  # the freed budget is not refilled


def test_ablating_every_entry_leaves_an_empty_context(retrieval):
    client, response = retrieval
    ablated = client.ablate_context(response.bundle, list(response.bundle.included_ids()))
    assert ablated.counterfactual.render() == "" and ablated.counterfactual.tokens_used == 0


def test_ablation_fails_closed_on_empty_duplicate_absent_or_malformed_targets(retrieval):
    client, response = retrieval
    bundle = response.bundle
    inside = bundle.entries[0].node_id
    for bad, needle in (
        ([], "at least one"),
        ([inside, inside], "only once"),
        ([uuid.uuid4()], "not an included"),
        (["nope"], "UUID"),
        (inside, "list"),
    ):
        with pytest.raises(InvalidInput, match=needle):
            client.ablate_context(bundle, bad)


def _cited_ablation(client, response, cited):
    citation = client.record_answer_citations(
        response.metadata.request_id, owner="alice", answer_id="ans", cited_node_ids=cited, method="model_reported"
    )
    return citation, client.ablate_context(response.bundle, [cited[0]])


@pytest.mark.parametrize(
    "baseline,counterfactual,tier,value",
    [
        (True, False, "load_bearing", 1.0),
        (True, True, "cited_non_flipping", 0.6),
        (False, True, "misleading", -1.0),
        (False, False, "cited_wrong_noncuring", 0.0),
    ],
)
def test_presence_credit_follows_the_four_tiers(retrieval, baseline, counterfactual, tier, value):
    client, response = retrieval
    citation, ablated = _cited_ablation(client, response, [response.bundle.entries[0].node_id])
    credit = client.assess_context_presence(
        ablated, citation, baseline_correct=baseline, counterfactual_correct=counterfactual, protocol="fixed-reader-v1"
    )
    assert (credit.tier, credit.value) == (tier, value)
    assert credit.baseline_context_sha256 == citation.context_sha256


def test_presence_credit_rejects_uncited_targets_mismatched_contexts_and_multi_target_ablations(retrieval):
    client, response = retrieval
    entries = response.bundle.entries
    citation, ablated = _cited_ablation(client, response, [entries[0].node_id])
    uncited = client.ablate_context(response.bundle, [entries[1].node_id])
    with pytest.raises(InvalidInput, match="not cited"):
        client.assess_context_presence(
            uncited, citation, baseline_correct=True, counterfactual_correct=False, protocol="p"
        )
    double = client.ablate_context(response.bundle, [entries[0].node_id, entries[1].node_id])
    with pytest.raises(InvalidInput, match="exactly one"):
        client.assess_context_presence(
            double, citation, baseline_correct=True, counterfactual_correct=False, protocol="p"
        )
    other = client.retrieve("Rex the dog", owner="alice", reference_time=NOW)
    foreign = client.ablate_context(other.bundle, [other.bundle.entries[0].node_id])
    foreign_citation = citation.model_copy(update={"cited_node_ids": (other.bundle.entries[0].node_id,)})
    with pytest.raises(InvalidInput, match="different contexts"):
        client.assess_context_presence(
            foreign, foreign_citation, baseline_correct=True, counterfactual_correct=False, protocol="p"
        )
    with pytest.raises(InvalidInput, match="baseline_correct"):
        client.assess_context_presence(
            ablated, citation, baseline_correct=1, counterfactual_correct=False, protocol="p"
        )
    with pytest.raises(InvalidInput, match="protocol"):
        client.assess_context_presence(
            ablated, citation, baseline_correct=True, counterfactual_correct=False, protocol=" "
        )


# --- no global learning -----------------------------------------------------------------------


def test_recording_feedback_leaves_global_configuration_and_other_owners_byte_identical(retrieval):
    client, response = retrieval
    settings_before = client.settings.canonical_bytes()
    bob_before = client.retrieve("cat", owner="bob", reference_time=NOW)
    for i in range(40):
        r = client.retrieve(f"Miso cat {i}", owner="alice", reference_time=NOW)
        labels = {c.node_id: (j % 2 == 0) for j, c in enumerate(r.receipt.candidates)}
        client.record_relevance(r.metadata.request_id, labels, owner="alice", method="structured_evaluation")
        client.record_answer_citations(
            r.metadata.request_id, owner="alice", answer_id=f"a{i}", cited_node_ids=[], method="model_reported"
        )
    bob_after = client.retrieve("cat", owner="bob", reference_time=NOW)
    assert client.settings.canonical_bytes() == settings_before

    def strip(rec):
        return {k: v for k, v in rec.canonical_dict().items() if k not in ("request_id", "projection_sha256")}

    assert strip(bob_after.receipt) == strip(bob_before.receipt)
    assert bob_after.context == bob_before.context
    alice_again = client.retrieve("Miso cat", owner="alice", reference_time=NOW)
    assert [(c.node_id, c.score) for c in alice_again.receipt.candidates] == [
        (c.node_id, c.score) for c in response.receipt.candidates
    ]
    assert receipt_bytes(client.get_receipt(response.metadata.request_id, "alice")) == receipt_bytes(response.receipt)
