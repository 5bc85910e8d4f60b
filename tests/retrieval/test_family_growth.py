"""A later interaction feature leaves family-2 profiles valid: the interaction weights family 2 was
defined with stay required, a newer one is optional (absent, it keeps the configured weight and
is not serialized). Exercised by pretending ``entity_match`` came after the family."""

from __future__ import annotations

import pytest

from prme_core.canonical import canonical_json
from prme_core.retrieval import multipliers as mult
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.multipliers import RankingMultipliers, adjusted_weights


@pytest.fixture
def entity_match_added_later(monkeypatch):
    monkeypatch.setattr(mult, "FAMILY_V2_INTERACTIONS", ("term_coverage", "bigram_overlap"))


def test_the_family_is_defined_by_the_interactions_of_its_first_layout():
    assert mult.FAMILY_V2_INTERACTIONS == ("term_coverage", "bigram_overlap", "entity_match")


def test_a_profile_without_the_later_weight_is_family_2_and_keeps_its_bytes(entity_match_added_later):
    older = RankingMultipliers(lexical=1.5, term_coverage=0.3, bigram_overlap=0.1)
    assert older.family == mult.FAMILY_V2 and older.interaction_vector() == (0.3, 0.1, None)
    data = older.model_dump(mode="json")
    assert "entity_match" not in data and RankingMultipliers.model_validate(data) == older
    assert RankingMultipliers.model_validate_json(canonical_json(data)).model_dump(mode="json") == data


def test_an_absent_later_weight_keeps_the_configured_one(entity_match_added_later):
    base = ScoringWeights(entity_match=0.2, term_coverage=0.05)
    older = RankingMultipliers(term_coverage=0.3, bigram_overlap=0.1)
    moved = adjusted_weights(base, older)
    assert (moved.term_coverage, moved.bigram_overlap, moved.entity_match) == (0.3, 0.1, 0.2)
    assert moved.vector() == base.vector()
    same = RankingMultipliers(term_coverage=0.05, bigram_overlap=0.0)
    assert same.is_identity_for(base) and adjusted_weights(base, same) is base
    newer = RankingMultipliers(term_coverage=0.05, bigram_overlap=0.0, entity_match=0.4)
    assert not newer.is_identity_for(base) and adjusted_weights(base, newer).entity_match == 0.4


def test_the_family_weights_stay_required_and_a_later_weight_needs_them(entity_match_added_later):
    with pytest.raises(ValueError, match="bigram_overlap is missing"):
        RankingMultipliers(term_coverage=0.3, entity_match=0.1)
    with pytest.raises(ValueError, match="entity_match belongs to family 2"):
        RankingMultipliers(entity_match=0.1)


def test_today_a_family_2_adjustment_still_names_every_interaction_weight():
    with pytest.raises(ValueError, match="entity_match is missing"):
        RankingMultipliers(term_coverage=0.3, bigram_overlap=0.1)
