"""The feedback snapshot cut on both backends: bounded, verified, reproducible."""

from datetime import UTC, datetime

import pytest

from prme_core.errors import CorruptRecord, InvalidInput, SnapshotTooLarge
from prme_core.learning.snapshot import load_snapshot
from tests.tampering import edit_receipt_payload, tamper, tamper_projection

NOW = datetime(2024, 6, 1, tzinfo=UTC)


@pytest.fixture
def judged(client):
    client.store_batch("alice", [f"Alice: memory {i} about cats and trains" for i in range(12)])
    client.store_batch("bob", ["Bob: a memory about cats"])
    for i in range(5):
        r = client.retrieve(f"cats trains {i}", owner="alice", scopes=["personal"], reference_time=NOW, limit=6)
        client.record_relevance(
            r.metadata.request_id,
            {c.node_id: j % 2 == 0 for j, c in enumerate(r.receipt.candidates)},
            owner="alice",
            method="structured_evaluation",
        )
    rb = client.retrieve("cats", owner="bob", scopes=["personal"], reference_time=NOW)
    client.record_relevance(rb.metadata.request_id, {rb.results[0].node_id: True}, owner="bob", method="explicit_user")
    return client


def _tamper(client, sql, params):
    tamper(client.store, sql, params)


def test_the_cut_holds_only_the_owners_records_with_verified_receipts(judged):
    snapshot = judged.snapshot_feedback("alice")
    assert len(snapshot.records) == 5 and len(snapshot.receipts) == 5
    assert all(r.owner == "alice" for r in snapshot.records)
    assert all(snapshot.receipts[r.request_id].checksum == r.receipt_checksum for r in snapshot.records)


def test_records_admitted_after_the_cut_are_not_in_it_and_the_manifest_reloads_it_exactly(judged):
    snapshot = judged.snapshot_feedback("alice")
    r = judged.retrieve("cats later", owner="alice", scopes=["personal"], reference_time=NOW)
    judged.record_relevance(r.metadata.request_id, {r.results[0].node_id: True}, owner="alice", method="explicit_user")
    reloaded = load_snapshot(judged.store, snapshot.manifest())
    assert reloaded.snapshot_sha256 == snapshot.snapshot_sha256 and len(reloaded.records) == 5
    assert judged.snapshot_feedback("alice").snapshot_sha256 != snapshot.snapshot_sha256


def test_exceeding_max_records_fails_and_never_truncates(judged):
    assert len(judged.snapshot_feedback("alice", max_records=5).records) == 5
    with pytest.raises(SnapshotTooLarge, match="max_records=4"):
        judged.snapshot_feedback("alice", max_records=4)
    for bad in (0, 100_001, True, "10"):
        with pytest.raises(InvalidInput, match="max_records"):
            judged.snapshot_feedback("alice", max_records=bad)


def test_a_corrupt_receipt_payload_fails_the_cut(judged):
    record = judged.list_relevance("alice")[0]
    # the receipt's JSON edited in the form it is stored in (text, or compressed on PostgreSQL)
    edit_receipt_payload(judged.store, str(record.request_id), '"query":"', '"query":"x')
    with pytest.raises(CorruptRecord, match="no longer matches its checksum"):
        judged.snapshot_feedback("alice")


def test_a_corrupt_candidate_projection_fails_the_cut(judged):
    record = judged.list_relevance("alice")[0]
    tamper_projection(judged.store, str(record.request_id), adjustments='[{"coefficient":0.5,"kind":"session_decay"}]')
    with pytest.raises(CorruptRecord, match="projection"):
        judged.snapshot_feedback("alice")


def test_engine_evaluate_learning_is_deterministic_and_changes_nothing(judged):
    first = judged.evaluate_learning("alice", scopes=["personal"])
    second = judged.evaluate_learning("alice", scopes=["personal"])
    assert first.canonical_bytes() == second.canonical_bytes()
    assert first.decision == "insufficient_data" and first.coverage.feedback_records == 5
    assert (
        judged.retrieve("cats", owner="alice", scopes=["personal"], reference_time=NOW).metadata.ranking_profile_status
        == "none"
    )


def test_a_receipt_whose_digest_field_lies_far_from_its_end_still_resolves(client):
    # The query appears twice after "projection_sha256" in a canonical receipt, so a 4,000-
    # character query puts the field more than the first-searched tail away from the end.
    client.store_batch("carol", ["Carol: cats " + "word " * 20, "Carol: trains"])
    query = "cats " + "x" * 3995
    r = client.retrieve(query, owner="carol", scopes=["personal"], reference_time=NOW)
    client.record_relevance(r.metadata.request_id, {r.results[0].node_id: True}, owner="carol", method="explicit_user")
    snapshot = client.snapshot_feedback("carol")
    evidence = snapshot.receipts[str(r.metadata.request_id)]
    assert evidence.header["query"] == query and evidence.checksum == r.receipt.checksum()


def test_candidate_ranks_are_found_without_splitting_and_agree_with_the_split_ids(judged):
    snapshot = judged.snapshot_feedback("alice")
    for evidence in snapshot.receipts.values():
        ids = evidence.node_ids()
        assert evidence.ranks_of(ids) == [ids.index(i) for i in ids]
        assert evidence.node_ids_at(range(len(ids))) == ids
        assert evidence.ranks_of([ids[0].upper(), ids[0][:35], "00000000-0000-4000-8000-000000000000"]) == [None] * 3


def test_ranks_of_ids_that_are_not_uuid_strings_come_from_the_split_ids():
    from prme_core.learning.snapshot import ReceiptEvidence
    from prme_core.receipts.projection import PackedProjection

    ids = ["node-a", "a-much-longer-node-identifier-than-a-uuid-string", "b"]
    header = {"candidate_count": len(ids)}
    evidence = ReceiptEvidence("r", "0" * 64, PackedProjection(header, b"", b"", "\x1f".join(ids), "", ""))
    assert evidence.ranks_of([*ids, "node"]) == [0, 1, 2, None]
    assert evidence.node_ids_at([2, 0]) == ["b", "node-a"]
    # Lengths 35 and 37 add up like two 36-character ids; offsets would then mislead.
    short, long = "a" * 35, "b" * 37
    evidence = ReceiptEvidence(
        "r", "0" * 64, PackedProjection({"candidate_count": 2}, b"", b"", f"{short}\x1f{long}", "", "")
    )
    assert evidence.ranks_of([long, short, "b" * 36]) == [1, 0, None]
    assert evidence.node_ids_at([1]) == [long]


def test_payload_verification_finds_the_digest_field_in_the_tail_or_anywhere_and_checks_every_hash():
    import hashlib

    import pyarrow as pa

    from prme_core.storage.operation_log import _DIGEST_TAIL, _verify_payloads

    marker = b'"projection_sha256":"'
    near_end = b'{"a":"' + b"x" * 9000 + b'","projection_sha256":"' + b"1" * 64 + b'","q":"y"}'
    far_from_end = b'{"projection_sha256":"' + b"2" * 64 + b'","q":"' + b"z" * (2 * _DIGEST_TAIL) + b'"}'
    twice = b'{"c":"\\"projection_sha256\\":\\"' + b"9" * 64 + b'","projection_sha256":"' + b"3" * 64 + b'"}'
    absent = b'{"q":"nothing here"}'
    payloads = [near_end, far_from_end, twice, absent]
    checksums = [hashlib.sha256(p).hexdigest() for p in payloads]
    checksums[3] = "f" * 64  # a payload that no longer matches its checksum
    column = pa.array([b"skipped"] + [p.decode() for p in payloads], type=pa.string()).slice(1)  # a non-zero offset
    intact, digests = _verify_payloads(column, pa.array(checksums), marker)
    assert intact == [True, True, True, False]
    assert digests == ["1" * 64, "2" * 64, "3" * 64, ""]
