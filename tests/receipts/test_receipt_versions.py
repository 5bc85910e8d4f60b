"""Receipt schema versions 1-10: golden bytes, version rules, replay, tamper checks, persistence.

The golden files under ``tests/fixtures/receipts`` come from ``make_fixtures.py`` (regenerate
only deliberately); every test that needs a variant edits a golden receipt's parsed JSON.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest
from pydantic import ValidationError

from prme_core import MemoryClient
from prme_core.canonical import EMPTY_SHA256, canonical_json
from prme_core.errors import IdempotencyConflict, ReplayUnavailable
from prme_core.features import layout_for
from prme_core.receipts.model import TRACE_FIELDS, RankFusion, ReceiptCandidate, RetrievalReceipt, ScoreAdjustment
from prme_core.receipts.projection import projection_digest
from prme_core.receipts.store import get_receipt, persist_receipt, receipt_bytes, write_receipts
from prme_core.retrieval.config import PackingConfig, ScoringWeights
from prme_core.retrieval.formula import sort_key
from prme_core.retrieval.reranker import TokenOverlapReranker

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "receipts"
_spec = importlib.util.spec_from_file_location("receipt_fixtures", FIXTURES / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(mf)  # type: ignore[union-attr]

VERSIONS = mf.FIXTURE_VERSIONS
REPLAYABLE = tuple(v for v in VERSIONS if v >= 2)
PINNED: dict[str, str] = json.loads((FIXTURES / mf.CHECKSUMS_FILE).read_text(encoding="utf-8"))
NOW = datetime(2024, 6, 1, tzinfo=UTC)

MEMORIES = [
    {"content": "Alice: I adopted a grey cat named Miso last spring", "session_id": "s1"},
    {"content": "Bob: Miso sounds lovely, what does she eat?", "session_id": "s1"},
    {"content": "Alice: Miso eats salmon and refuses dry food", "session_id": "s1"},
    {"content": "Alice: my sister lives in Lisbon and teaches piano", "session_id": "s2"},
    {"content": "Alice: I switched to a Pixel phone, the old iPhone broke", "session_id": "s3"},
]


def golden(version: int) -> bytes:
    return (FIXTURES / mf.fixture_name(version)).read_bytes()


def golden_receipt(version: int) -> RetrievalReceipt:
    return RetrievalReceipt.model_validate_json(golden(version))


def golden_dict(version: int) -> dict[str, Any]:
    return orjson.loads(golden(version))


def load(data: dict[str, Any]) -> RetrievalReceipt:
    """Parse edited receipt JSON exactly as a stored payload is parsed."""
    return RetrievalReceipt.model_validate_json(canonical_json(data))


def rejected(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        load(data)


def as_version(data: dict[str, Any], version: int, packing: dict[str, Any] | None = None) -> dict[str, Any]:
    """``data`` relabelled as ``version``: fields newer than it dropped, ``packing`` added."""
    out = {
        **data,
        "schema_version": version,
        "packing": mf.packing_for(version, **{**data["packing"], **(packing or {})}),
    }
    out["scoring"] = mf.scoring_for(version, data["scoring"])
    if "weight_sets" in data:
        out["weight_sets"] = [mf.scoring_for(version, w) for w in data["weight_sets"]]
    return reprojected(out)


def reprojected(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the projection digest of its (edited) header and candidates, so that only the
    intended defect remains."""
    draft = RetrievalReceipt.model_construct(
        schema_version=data["schema_version"],
        request_id=UUID(data["request_id"]),
        owner=data["owner"],
        query=data["query"],
        scopes=tuple(data["scopes"]),
        ranking_policy=data.get("ranking_policy"),
        scoring=ScoringWeights.model_validate(data["scoring"]),
        weight_sets=tuple(ScoringWeights.model_validate(w) for w in data.get("weight_sets", ())),
        candidates=tuple(ReceiptCandidate.model_validate(c) for c in data["candidates"]),
    )
    return {**data, "projection_sha256": projection_digest(draft)}


def later_fields(version: int) -> list[tuple[str, str, int, Any]]:
    """(section, field, introduced in, historical meaning) of every field newer than ``version``."""
    return [("packing", k, since, old) for k, (since, old) in mf.PACKING_INTRODUCED.items() if since > version] + [
        ("scoring", k, since, old) for k, (since, old) in mf.SCORING_INTRODUCED.items() if since > version
    ]


def replay_key(receipt: RetrievalReceipt, index: int) -> tuple:
    c = receipt.candidates[index]
    return sort_key(
        receipt.ranking_policy, c.score, c.provenance.trace.path_score, str(c.node_id), c.reranker_score is not None
    )


@pytest.fixture(scope="module")
def retrieved() -> RetrievalReceipt:
    """A v9 receipt from a real retrieval, and the memory text it must never contain."""
    with MemoryClient("duckdb:///:memory:") as client:
        client.store_batch("alice", MEMORIES)
        return client.retrieve("What is the name of Alice's cat?", owner="alice", reference_time=NOW, limit=5).receipt


# --- golden fixtures ---------------------------------------------------------------------------


def test_checksums_file_pins_exactly_the_golden_fixture_files():
    assert set(PINNED) == {mf.fixture_name(v) for v in VERSIONS} | {mf.POOL_FIXTURE}
    assert {p.name for p in FIXTURES.glob("receipt-v*")} == set(PINNED)


def test_golden_packed_pool_is_pinned_and_reproduced_by_the_generator():
    data = (FIXTURES / mf.POOL_FIXTURE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == PINNED[mf.POOL_FIXTURE]
    assert mf.golden_bytes()[mf.POOL_FIXTURE] == data
    assert golden_receipt(11).pool.sha256 == PINNED[mf.POOL_FIXTURE]


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_fixture_parses_and_reserializes_byte_identically(version):
    receipt = golden_receipt(version)
    assert receipt.schema_version == version
    assert receipt_bytes(receipt) == golden(version)


@pytest.mark.parametrize("version", VERSIONS)
def test_golden_fixture_sha256_equals_its_pinned_checksum(version):
    assert hashlib.sha256(golden(version)).hexdigest() == PINNED[mf.fixture_name(version)]


@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_generator_reproduces_the_golden_bytes(version):
    assert mf.golden_bytes()[mf.fixture_name(version)] == golden(version)


# --- later fields are omitted on write and filled on read --------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_serialized_receipt_records_exactly_the_configuration_fields_of_its_version(version):
    data = golden_dict(version)
    for section, introduced in (("packing", mf.PACKING_INTRODUCED), ("scoring", mf.SCORING_INTRODUCED)):
        for name, (since, _) in introduced.items():
            assert (name in data[section]) == (since <= version), f"{section}.{name} in a v{version} receipt"
    for i, weights in enumerate(data.get("weight_sets", [])):
        assert ("current_update_multiplier" in weights) == (version >= 9), f"weight_sets[{i}] in a v{version} receipt"


def test_version_3_bytes_contain_no_field_introduced_by_versions_4_to_9():
    data = golden(3)
    for name in (
        b'"multipath_ordering"',
        b'"context_guidance_mode"',
        b'"context_format"',
        b'"episode_context_top_k"',
        b'"episode_context_local_k"',
        b'"episode_context_score_decay"',
        b'"current_update_multiplier"',
    ):
        assert name not in data


def test_version_1_bytes_contain_no_weight_sets_ranking_policy_execution_or_provenance():
    data = golden_dict(1)
    assert not {"weight_sets", "ranking_policy", "execution"} & set(data)
    assert all("provenance" not in c for c in data["candidates"])


def test_version_2_bytes_contain_no_execution_descriptor():
    data = golden_dict(2)
    assert "execution" not in data and data["ranking_policy"] == "score_path_id" and data["weight_sets"]


@pytest.mark.parametrize("version", VERSIONS)
def test_parsing_fills_the_historical_meaning_of_every_later_field(version):
    receipt = golden_receipt(version)
    for section, name, _, historical in later_fields(version):
        assert getattr(getattr(receipt, section), name) == historical, f"{section}.{name} of a v{version} receipt"


def test_parsed_version_3_means_density_guidance_off_auditable_and_no_episode_routing():
    packing = golden_receipt(3).packing
    assert packing.multipath_ordering == "density" and packing.context_guidance_mode == "off"
    assert packing.context_format == "auditable" and packing.episode_context_top_k == 0


def test_parsed_version_8_means_a_disabled_current_update_multiplier_everywhere():
    receipt = golden_receipt(8)
    assert receipt.scoring.current_update_multiplier == 1.0
    assert [w.current_update_multiplier for w in receipt.weight_sets] == [1.0]


def test_historical_meaning_ignores_the_application_default():
    # the application default ordering is balanced; a version 1-3 receipt still means density
    assert PackingConfig().multipath_ordering == "balanced"
    assert {golden_receipt(v).packing.multipath_ordering for v in (1, 2, 3)} == {"density"}


# --- older versions reject later claims --------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "section", "name", "since", "value"),
    [(v, section, name, since, value) for v in VERSIONS for section, name, since, value in later_fields(v)],
    ids=lambda p: str(p),
)
def test_an_older_receipt_recording_a_later_field_is_rejected_even_with_its_historical_value(
    version, section, name, since, value
):
    data = golden_dict(version)
    data[section][name] = value
    rejected(data, rf"{section}\.{name} was introduced in receipt version {since}")


@pytest.mark.parametrize("version", [v for v in REPLAYABLE if v < 9])
def test_an_older_weight_set_recording_current_update_multiplier_is_rejected(version):
    data = golden_dict(version)
    data["weight_sets"][0]["current_update_multiplier"] = 1.0
    rejected(data, r"weight_sets\[0\]\.current_update_multiplier was introduced in receipt version 9")


def test_version_3_recording_multipath_ordering_is_rejected():
    data = golden_dict(3)
    data["packing"]["multipath_ordering"] = "density"
    rejected(data, "introduced in receipt version 4")


def test_version_4_claiming_balanced_ordering_is_rejected():
    data = golden_dict(4)
    data["packing"]["multipath_ordering"] = "balanced"
    rejected(data, "balanced ordering requires a version 5 receipt")


def test_version_7_recording_episode_context_top_k_is_rejected():
    data = as_version(golden_dict(5), 7, packing={"context_guidance_mode": "off", "context_format": "auditable"})
    assert load(data).schema_version == 7  # the v7 base is valid
    data["packing"]["episode_context_top_k"] = 2
    rejected(data, r"packing\.episode_context_top_k was introduced in receipt version 8")


def test_version_8_containing_a_current_update_adjustment_is_rejected():
    data = as_version(golden_dict(9), 8)
    assert any(
        a["kind"] == "current_update" for c in data["candidates"] for a in c["provenance"].get("adjustments", [])
    )
    rejected(data, "a version 8 receipt cannot contain a current_update adjustment")


def test_version_7_containing_an_episode_decay_adjustment_is_rejected():
    data = as_version(golden_dict(8), 7)
    rejected(data, "a version 7 receipt cannot contain a episode_decay adjustment")


def test_version_2_with_an_execution_descriptor_is_rejected():
    data = as_version(golden_dict(3), 2)
    assert "execution" in data
    rejected(data, "receipts of version 3 or later carry an execution descriptor")


def test_version_3_without_an_execution_descriptor_is_rejected():
    data = golden_dict(3)
    del data["execution"]
    rejected(data, "receipts of version 3 or later carry an execution descriptor")


def test_version_1_with_provenance_is_rejected():
    data = as_version(golden_dict(2), 1)
    data.pop("weight_sets"), data.pop("ranking_policy")
    rejected(data, "version 1 receipts carry no score provenance")


@pytest.mark.parametrize(
    ("section", "name"),
    [
        *(("packing", name) for name in mf.PACKING_INTRODUCED),
        *(("scoring", name) for name in mf.SCORING_INTRODUCED),
    ],
)
def test_a_current_version_receipt_omitting_a_versioned_field_is_rejected(section, name):
    data = golden_dict(10)
    del data[section][name]
    rejected(data, rf"a version 10 receipt must record {section}\.{name} explicitly")


def test_version_9_weight_set_omitting_current_update_multiplier_is_rejected():
    data = golden_dict(9)
    del data["weight_sets"][1]["current_update_multiplier"]
    rejected(data, r"must record weight_sets\[1\]\.current_update_multiplier explicitly")


# --- replay ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", REPLAYABLE)
def test_replay_reproduces_the_recorded_scores_and_order(version):
    receipt = golden_receipt(version)
    replayed = receipt.replay_ranking()
    assert replayed.order == tuple(c.node_id for c in receipt.candidates)
    assert replayed.scores == tuple(c.score for c in receipt.candidates)
    receipt.validate()


def test_version_1_replay_raises_replay_unavailable():
    receipt = golden_receipt(1)
    with pytest.raises(ReplayUnavailable, match="version 1 receipts lack replayable score provenance"):
        receipt.replay_ranking()
    with pytest.raises(ReplayUnavailable):
        receipt.validate()


def test_version_1_receipt_still_parses_with_its_candidates_and_context():
    receipt = golden_receipt(1)
    assert receipt.ranking_policy is None and receipt.weight_sets == () and receipt.execution is None
    assert [c.context_position for c in receipt.candidates] == [0, 1, None]
    assert all(c.provenance is None for c in receipt.candidates)


def test_session_inheritance_keeps_the_features_of_a_source_absent_from_the_set():
    receipt = golden_receipt(4)
    inherited = receipt.candidates[1]
    assert inherited.provenance.base_node_id == mf.node(9) and receipt.candidate(mf.node(9)) is None
    assert inherited.provenance.adjustments[0].source_node_id == mf.node(9)


# --- tampering is rejected on load -------------------------------------------------------------


@pytest.mark.parametrize("version", REPLAYABLE)
def test_a_changed_candidate_score_is_rejected(version):
    data = golden_dict(version)
    data["candidates"][0]["score"] += 1e-9
    rejected(data, "score provenance does not reproduce the returned score")


@pytest.mark.parametrize("feature", ["semantic", "lexical", "recency", "epistemic_weight", "node_type_boost"])
def test_a_changed_trace_feature_is_rejected(feature):
    data = golden_dict(9)
    trace = data["candidates"][1]["provenance"]["trace"]
    trace[TRACE_FIELDS.index(feature)] *= 0.5
    rejected(data, "replayed base score")


def test_a_changed_recorded_base_score_is_rejected():
    data = golden_dict(9)
    data["candidates"][1]["provenance"]["trace"][-1] += 1e-6
    rejected(data, "replayed base score")


def test_a_changed_path_score_that_replay_cannot_see_is_caught_by_the_projection_digest():
    data = golden_dict(9)
    data["candidates"][0]["provenance"]["trace"][layout_for(9).trace_fields.index("path_score")] = 1.0
    rejected(data, "projection_sha256 does not match")


@pytest.mark.parametrize("version", REPLAYABLE)
def test_a_swapped_candidate_order_is_rejected(version):
    data = golden_dict(version)
    data["candidates"][0], data["candidates"][-1] = data["candidates"][-1], data["candidates"][0]
    rejected(data, "does not reproduce the returned ranking order")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_changed_projection_sha256_is_rejected(version):
    data = golden_dict(version)
    data["projection_sha256"] = hashlib.sha256(b"forged").hexdigest()
    rejected(data, "projection_sha256 does not match")


@pytest.mark.parametrize("field", ["query", "owner"])
def test_a_changed_header_field_is_caught_by_the_projection_digest(field):
    data = golden_dict(9)
    data[field] = data[field] + " x"
    rejected(data, "projection_sha256 does not match")


@pytest.mark.parametrize("version", VERSIONS)
def test_duplicate_candidate_ids_are_rejected(version):
    data = golden_dict(version)
    data["candidates"][1]["node_id"] = data["candidates"][0]["node_id"]
    rejected(data, "receipt candidate identities must be unique")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_non_empty_context_hash_with_no_candidate_in_context_is_rejected(version):
    data = golden_dict(version)
    for c in data["candidates"]:
        for key in ("context_position", "representation"):
            c.pop(key, None)
        c.update(in_context=False, has_content=False, token_cost=0)
    assert data["context_sha256"] != EMPTY_SHA256
    rejected(data, "an empty context hashes to the SHA-256 of the empty string")


def test_provenance_naming_a_weight_set_that_does_not_exist_is_rejected():
    data = golden_dict(9)
    data["candidates"][0]["provenance"]["weights"] = len(data["weight_sets"])
    rejected(data, "names weight set 2, which does not exist")


def test_context_positions_with_a_gap_are_rejected():
    data = golden_dict(9)
    data["candidates"][2]["context_position"] = 5
    rejected(data, r"context positions must be 0\.\.n-1")


def test_more_candidates_than_the_result_limit_are_rejected():
    data = golden_dict(9)
    data["result_limit"] = len(data["candidates"]) - 1
    rejected(data, "more candidates than its result limit")


# --- sort policies -----------------------------------------------------------------------------


def policy_receipt(policy: str, candidates: tuple) -> RetrievalReceipt:
    return mf.build_receipt(**mf.common_fields(9, variant=3), ranking_policy=policy, candidates=candidates)


def test_score_path_id_breaks_equal_scores_by_path_score_then_node_id():
    w = mf.scoring_for(9)
    receipt = policy_receipt(
        "score_path_id",
        (
            mf.scored(7, mf.F_MIDDLE, w, paths=("graph", "lexical", "semantic")),
            mf.scored(3, mf.F_MIDDLE, w, paths=("lexical", "semantic")),
            mf.scored(5, mf.F_MIDDLE, w, paths=("lexical", "semantic")),
            mf.scored(1, mf.F_MIDDLE, w, paths=("semantic",)),
        ),
    )
    assert len({c.score for c in receipt.candidates}) == 1
    assert receipt.replay_ranking().order == (mf.node(7), mf.node(3), mf.node(5), mf.node(1))


def test_score_path_id_rejects_an_equal_score_tie_ordered_by_id_against_path_score():
    w = mf.scoring_for(9)
    with pytest.raises(ValidationError, match="ranking order"):
        policy_receipt(
            "score_path_id",
            (
                mf.scored(1, mf.F_MIDDLE, w, paths=("semantic",)),
                mf.scored(2, mf.F_MIDDLE, w, paths=("lexical", "semantic")),
            ),
        )


def test_score_id_breaks_equal_scores_by_node_id_ignoring_path_score():
    w = mf.scoring_for(9)
    receipt = policy_receipt(
        "score_id",
        (
            mf.scored(1, mf.F_MIDDLE, w, paths=("semantic",)),
            mf.scored(2, mf.F_MIDDLE, w, paths=("graph", "lexical", "semantic")),
        ),
    )
    assert receipt.replay_ranking().order == (mf.node(1), mf.node(2))
    assert golden_receipt(4).replay_ranking().order[1:3] == (mf.node(2), mf.node(3))  # golden tie, path 1/3 first


def test_reranked_prefix_puts_reranked_candidates_before_a_higher_scored_tail():
    receipt = golden_receipt(3)
    prefix, tail = receipt.candidates[:2], receipt.candidates[2:]
    assert all(c.reranker_score is not None for c in prefix) and all(c.reranker_score is None for c in tail)
    assert min(c.score for c in prefix) < max(c.score for c in tail)
    assert receipt.replay_ranking().order == tuple(c.node_id for c in receipt.candidates)


def test_reranked_prefix_orders_the_tail_by_score_then_path_score():
    w = mf.scoring_for(9)
    blend = (ScoreAdjustment(kind="neural_blend", coefficient=0.3, neural_score=0.0),)
    receipt = policy_receipt(
        "reranked_prefix",
        (
            mf.scored(9, mf.F_WEAK, w, adjustments=blend, reranker_score=0.0),
            mf.scored(4, mf.F_MIDDLE, w, paths=("graph", "lexical", "semantic")),
            mf.scored(2, mf.F_MIDDLE, w, paths=("semantic",)),
        ),
    )
    assert receipt.replay_ranking().order == (mf.node(9), mf.node(4), mf.node(2))


@pytest.mark.parametrize("policy", ["score_path_id", "score_id"])
def test_a_receipt_ordered_under_another_policy_is_rejected(policy):
    data = golden_dict(3)
    data["ranking_policy"] = policy
    rejected(data, "ranking order|projection_sha256")


@pytest.mark.parametrize(
    ("label", "client_kwargs", "retrieve_kwargs", "policy"),
    [
        ("default", {}, {"packing": {"session_context_top_k": 0}}, "score_path_id"),
        (
            "reranker",
            {"reranker": TokenOverlapReranker()},
            {"packing": {"session_context_top_k": 0}},
            "reranked_prefix",
        ),
        ("sessions", {}, {"packing": {"session_context_top_k": 5}}, "score_id"),
    ],
)
def test_real_retrieval_order_follows_the_key_of_its_recorded_policy(label, client_kwargs, retrieve_kwargs, policy):
    with MemoryClient("duckdb:///:memory:", **client_kwargs) as client:
        client.store_batch("alice", MEMORIES)
        receipt = client.retrieve("adopted grey cat Miso", owner="alice", reference_time=NOW, **retrieve_kwargs).receipt
    assert receipt.ranking_policy == policy and len(receipt.candidates) >= 2
    keys = [replay_key(receipt, i) for i in range(len(receipt.candidates))]
    assert keys == sorted(keys)
    assert receipt.replay_ranking().order == tuple(c.node_id for c in receipt.candidates)


# --- rank fusion (formula 2) -------------------------------------------------------------------


def test_rank_fusion_receipt_replays_exactly():
    receipt = mf.rank_fusion_receipt()
    assert receipt.weight_sets[0].fusion == "rrf"
    assert all(c.provenance.formula_version == 2 for c in receipt.candidates)
    replayed = receipt.replay_ranking()
    assert replayed.scores == tuple(c.score for c in receipt.candidates)
    assert replayed.order == tuple(c.node_id for c in receipt.candidates)
    receipt.validate()


def test_rank_fusion_scores_first_on_both_channels_as_one_and_first_on_one_as_one_half():
    scores = {c.node_id: c.score for c in mf.rank_fusion_receipt().candidates}
    assert scores[mf.node(1)] == 1.0
    assert scores[mf.node(2)] == round(61 / 2 / 62, 10)  # second on semantic only, k = 60


def test_rank_fusion_receipt_reserializes_byte_identically():
    data = receipt_bytes(mf.rank_fusion_receipt())
    assert receipt_bytes(RetrievalReceipt.model_validate_json(data)) == data
    assert b'"lexical_rank"' not in orjson.dumps(orjson.loads(data)["candidates"][1]["provenance"]["rank_fusion"])


def test_a_changed_channel_rank_is_rejected():
    data = orjson.loads(receipt_bytes(mf.rank_fusion_receipt()))
    data["candidates"][1]["provenance"]["rank_fusion"]["semantic_rank"] = 3
    rejected(data, "replayed base score")


def test_formula_2_provenance_in_a_version_8_receipt_is_rejected():
    data = as_version(orjson.loads(receipt_bytes(mf.rank_fusion_receipt())), 8)
    rejected(data, "rank fusion provenance requires a version 9 receipt")


def test_formula_1_provenance_under_a_rank_fusion_weight_set_is_rejected():
    data = golden_dict(9)
    data["weight_sets"][0]["fusion"] = "rrf"
    rejected(data, "formula version 1 disagrees with fusion='rrf'")


def test_formula_2_provenance_without_rank_fusion_inputs_is_rejected():
    data = orjson.loads(receipt_bytes(mf.rank_fusion_receipt()))
    del data["candidates"][0]["provenance"]["rank_fusion"]
    rejected(data, "formula 2 provenance records rank_fusion")


def test_real_rank_fusion_retrieval_replays_exactly():
    with MemoryClient("duckdb:///:memory:") as client:
        client.store_batch("alice", MEMORIES)
        receipt = client.retrieve(
            "Alice cat Miso", owner="alice", reference_time=NOW, scoring={"fusion": "rrf"}
        ).receipt
    assert receipt.candidates and all(isinstance(c.provenance.rank_fusion, RankFusion) for c in receipt.candidates)
    assert receipt.replay_ranking().scores == tuple(c.score for c in receipt.candidates)


# --- canonical form ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_canonical_bytes_are_the_canonical_json_of_the_canonical_dict(version):
    receipt = golden_receipt(version)
    assert receipt_bytes(receipt) == canonical_json(receipt.canonical_dict())


def test_real_receipt_bytes_are_the_canonical_json_of_its_canonical_dict(retrieved):
    data = receipt_bytes(retrieved)
    assert data == canonical_json(retrieved.canonical_dict())
    assert receipt_bytes(RetrievalReceipt.model_validate_json(data)) == data


@pytest.mark.parametrize("version", VERSIONS)
def test_canonical_bytes_hold_no_nan_infinity_or_null(version):
    data = golden(version)
    assert b"NaN" not in data and b"Infinity" not in data and b"null" not in data


def test_real_receipt_bytes_hold_no_nan_and_no_candidate_text(retrieved):
    data = receipt_bytes(retrieved)
    assert retrieved.candidates and any(c.reranker_score is None for c in retrieved.candidates)
    assert b"NaN" not in data and b"null" not in data
    text = data.decode("utf-8")
    for memory in MEMORIES:
        assert memory["content"] not in text
    assert "Miso" not in text and "Lisbon" not in text
    hashes = {c.content_sha256 for c in retrieved.candidates}
    assert hashlib.sha256(MEMORIES[0]["content"].encode()).hexdigest() in hashes


def test_a_nan_score_is_rejected():
    data = golden(1).replace(b'"score":0.375', b'"score":NaN')
    with pytest.raises(ValidationError):
        RetrievalReceipt.model_validate_json(data)


# --- persistence -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_persisted_golden_receipt_reads_back_equal_with_its_pinned_checksum(open_store_at, version):
    store = open_store_at()
    receipt = golden_receipt(version)
    stored = persist_receipt(store, receipt)
    assert stored.checksum == PINNED[mf.fixture_name(version)]
    found = get_receipt(store, mf.OWNER, receipt.request_id)
    assert found is not None
    assert found[0] == receipt and found[1] == stored.checksum
    assert receipt_bytes(found[0]) == golden(version)


def test_a_built_receipt_equals_its_persisted_copy(open_store_at):
    store = open_store_at()
    built = mf.receipt_v9()
    persist_receipt(store, built)
    assert get_receipt(store, mf.OWNER, built.request_id)[0] == built


def test_get_receipt_for_another_owner_returns_none(open_store_at):
    store = open_store_at()
    receipt = golden_receipt(9)
    persist_receipt(store, receipt)
    assert get_receipt(store, "bob", receipt.request_id) is None
    assert get_receipt(store, mf.OWNER, UUID(int=12345)) is None


def test_receipts_written_in_bulk_read_back_with_their_pinned_checksums_and_projections(open_store_at):
    store = open_store_at()
    receipts = [golden_receipt(v) for v in VERSIONS]
    with store.transaction() as tx:
        checksums = write_receipts(tx, receipts)
    assert checksums == [PINNED[mf.fixture_name(v)] for v in VERSIONS]
    for receipt, checksum in zip(receipts, checksums):
        assert get_receipt(store, mf.OWNER, receipt.request_id) == (receipt, checksum)
    with store.transaction(read_only=True) as tx:
        rows = list(tx.receipt_projection_rows(mf.OWNER, [str(r.request_id) for r in receipts]))
    assert {(row[0], row[1]) for row in rows} == {(str(r.request_id), c) for r, c in zip(receipts, checksums)}


def test_a_bulk_write_with_a_stored_request_id_fails_and_keeps_nothing(open_store_at):
    store = open_store_at()
    persist_receipt(store, golden_receipt(9))
    with pytest.raises(IdempotencyConflict, match="already has a stored receipt"), store.transaction() as tx:
        write_receipts(tx, [golden_receipt(8), golden_receipt(9)])
    assert get_receipt(store, mf.OWNER, golden_receipt(8).request_id) is None


def test_real_retrieval_receipt_reads_back_equal_with_the_reported_checksum():
    with MemoryClient("duckdb:///:memory:") as client:
        client.store_batch("alice", MEMORIES)
        response = client.retrieve("cat name", owner="alice", reference_time=NOW, limit=5)
        stored = client.get_receipt(response.metadata.request_id, "alice")
        assert stored == response.receipt
        assert hashlib.sha256(receipt_bytes(stored)).hexdigest() == response.metadata.receipt_checksum
        assert client.get_receipt(response.metadata.request_id, "bob") is None


# --- regressions of defects found while writing these tests ------------------------------------


@pytest.mark.parametrize("scoring_as", ["model", "dict"])
def test_build_constructs_a_version_8_receipt(scoring_as):
    fields = mf.common_fields(8, variant=4)
    w = fields["weight_sets"][0]
    # A model instance may carry a later field only at its historical meaning (1.0 before v9).
    as_model = lambda d: ScoringWeights.model_validate({**d, "current_update_multiplier": 1.0})  # noqa: E731
    fields["scoring"] = as_model(fields["scoring"]) if scoring_as == "model" else fields["scoring"]
    fields["weight_sets"] = (as_model(w),) if scoring_as == "model" else (w,)
    receipt = RetrievalReceipt.build(
        **fields, ranking_policy="score_path_id", candidates=(mf.scored(1, mf.F_MIDDLE, w),)
    )
    assert receipt.schema_version == 8


@pytest.mark.parametrize("written_as", [9.0, "9"])
def test_version_9_omitting_context_format_is_rejected_however_its_version_is_written(written_as):
    data = golden_dict(9)
    data["schema_version"] = written_as
    del data["packing"]["context_format"]
    rejected(data, "schema_version|integer|context_format")


def test_a_receipt_must_record_every_configuration_field_it_knows():
    data = golden_dict(9)
    del data["packing"]["session_context_top_k"]
    rejected(data, "session_context_top_k")
    data = golden_dict(9)
    del data["weight_sets"][0]["rrf_k"]
    rejected(data, "rrf_k")


def test_a_candidate_scoring_below_the_receipts_min_score_is_rejected():
    data = golden_dict(9)
    data["min_score"] = max(c["score"] for c in data["candidates"]) + 1.0
    rejected(data, "min_score")
