"""Profile family 2: the six multipliers plus bounded interaction weights, with the base as its
identity element; family 1 keeps its stored form."""

from __future__ import annotations

import pytest

from prme_core.errors import InvalidInput
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.multipliers import (
    FAMILY_V1,
    FAMILY_V2,
    UNITY,
    RankingMultipliers,
    adjusted_weights,
)
from tests.retrieval.test_pool_replay import NOW, QUERIES, conversation


def test_family_1_multipliers_serialize_exactly_as_before():
    m = RankingMultipliers(lexical=2.0)
    assert m.family == FAMILY_V1 and m.model_dump() == {
        "semantic": 1.0,
        "lexical": 2.0,
        "graph": 1.0,
        "recency": 1.0,
        "salience": 1.0,
        "confidence": 1.0,
    }


def test_family_2_names_all_three_interaction_weights_or_none():
    m = RankingMultipliers(term_coverage=0.2, bigram_overlap=0.0, entity_match=0.1)
    assert m.family == FAMILY_V2 and m.model_dump()["term_coverage"] == 0.2
    with pytest.raises(ValueError, match="bigram_overlap is missing"):
        RankingMultipliers(term_coverage=0.2, entity_match=0.1)


@pytest.mark.parametrize("value", [-0.01, 0.51, float("nan")])
def test_interaction_weights_are_bounded_to_zero_to_a_half(value):
    with pytest.raises(ValueError):
        RankingMultipliers(term_coverage=value, bigram_overlap=0.0, entity_match=0.0)


def test_the_base_is_the_identity_of_both_families():
    base = ScoringWeights(term_coverage=0.1)
    assert adjusted_weights(base, UNITY) is base
    assert adjusted_weights(base, RankingMultipliers.identity(FAMILY_V2, base)) is base
    moved = adjusted_weights(base, RankingMultipliers.from_vector((1.0,) * 6, (0.3, 0.1, 0.0)))
    assert moved.interaction_vector() == (0.3, 0.1, 0.0) and moved.vector() == base.vector()


def test_an_identity_adjustment_reproduces_base_retrieval_bit_for_bit(client):
    client.store_batch("alice", conversation())
    base = client.settings.scoring
    for query in QUERIES:
        plain = client.retrieve(query, owner="alice", reference_time=NOW).receipt
        identity = client.retrieve(
            query,
            owner="alice",
            reference_time=NOW,
            ranking_multipliers=RankingMultipliers.identity(FAMILY_V2, base),
        ).receipt
        assert [(c.node_id, c.score) for c in identity.candidates] == [(c.node_id, c.score) for c in plain.candidates]
        assert identity.weight_sets == plain.weight_sets


def test_interaction_weights_change_retrieval_and_are_recorded(client):
    client.store_batch("alice", conversation())
    adjustment = RankingMultipliers.from_vector((1.0,) * 6, (0.5, 0.5, 0.5))
    response = client.retrieve(QUERIES[0], owner="alice", reference_time=NOW, ranking_multipliers=adjustment)
    assert response.receipt.weight_sets[0].interaction_vector() == (0.5, 0.5, 0.5)
    assert response.metadata.ranking_multipliers["term_coverage"] == 0.5
    assert response.metadata.ranking_profile_status == "request_override"


def test_out_of_bound_interaction_weights_in_a_request_name_the_field(client):
    with pytest.raises(InvalidInput, match="term_coverage"):
        client.retrieve(
            "Miso",
            owner="alice",
            reference_time=NOW,
            ranking_multipliers={"term_coverage": 0.9, "bigram_overlap": 0.0, "entity_match": 0.0},
        )
