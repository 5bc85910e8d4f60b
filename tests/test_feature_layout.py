"""The ranking feature layout (prme_core.features) agrees with every model and column list that
uses it: receipt trace, scoring weights, multipliers, projection columns and the stored table."""

import re

import numpy as np
import pytest

from prme_core import features
from prme_core.features import (
    CURRENT_LAYOUT,
    FACTOR_NAMES,
    NEUTRAL_FACTORS,
    RECEIPT_LAYOUTS,
    SCALAR_NAMES,
    TRACE_FEATURES,
    WEIGHT_NAMES,
    layout_for,
)
from prme_core.receipts import projection
from prme_core.receipts.model import (
    CURRENT_SCHEMA_VERSION,
    MIN_SCHEMA_VERSION,
    TRACE_FIELDS,
    ScoreTrace,
)
from prme_core.retrieval.config import WEIGHT_FIELDS, ScoringWeights
from prme_core.retrieval.formula import weighted_base_scores
from prme_core.retrieval.multipliers import RankingMultipliers
from prme_core.storage.schema import MIGRATIONS
from prme_core.storage.sql import PROJECTION_COLUMNS, PROJECTION_STATE_COLUMNS


def test_every_receipt_schema_version_has_a_layout_and_the_current_one_is_the_newest():
    starts = [since for since, _ in RECEIPT_LAYOUTS]
    assert starts == sorted(set(starts)) and starts[0] == MIN_SCHEMA_VERSION and starts[-1] <= CURRENT_SCHEMA_VERSION
    for version in range(MIN_SCHEMA_VERSION, CURRENT_SCHEMA_VERSION + 1):
        assert isinstance(layout_for(version), features.FeatureLayout)
    assert layout_for(CURRENT_SCHEMA_VERSION) is CURRENT_LAYOUT
    with pytest.raises(ValueError, match="no feature layout"):
        layout_for(MIN_SCHEMA_VERSION - 1)


def test_score_trace_fields_are_the_layout_trace_fields_in_order():
    assert (
        TRACE_FIELDS
        == CURRENT_LAYOUT.trace_fields
        == (*WEIGHT_NAMES, *FACTOR_NAMES, *features.INTERACTION_NAMES, "path_score", "base_score")
    )
    assert tuple(ScoreTrace.model_fields) == TRACE_FIELDS


def test_layout_1_is_layout_2_without_interactions_and_keeps_every_factor_position():
    old, new = layout_for(9), layout_for(10)
    assert old.trace_fields == (*WEIGHT_NAMES, *FACTOR_NAMES, "path_score", "base_score")
    assert new.features[: len(old.features)] == old.features
    assert new.interactions == features.INTERACTION_NAMES == ("term_coverage", "bigram_overlap", "entity_match")
    assert TRACE_FEATURES.index("term_coverage") == features.INTERACTION_OFFSET


def test_every_interaction_name_is_a_bounded_scoring_weight_outside_the_six():
    for name in features.INTERACTION_NAMES:
        field = ScoringWeights.model_fields[name]
        assert field.default == 0.0
        with pytest.raises(ValueError):
            ScoringWeights(**{name: 0.51})
    assert ScoringWeights(term_coverage=0.5).vector() == ScoringWeights().vector()
    # family-2 adjustments set them absolutely (never as factors); family 1 leaves them out
    assert all(RankingMultipliers.model_fields[name].default is None for name in features.INTERACTION_NAMES)


def test_every_weight_name_is_a_scoring_weight_and_a_multiplier_field():
    assert WEIGHT_FIELDS == WEIGHT_NAMES
    assert tuple(RankingMultipliers.model_fields) == WEIGHT_NAMES + features.INTERACTION_NAMES
    assert set(WEIGHT_NAMES) | set(SCALAR_NAMES) <= set(ScoringWeights.model_fields)
    assert len(ScoringWeights().vector()) == len(RankingMultipliers().vector()) == features.WEIGHT_COUNT


def test_factor_features_have_no_weight_and_a_neutral_value():
    assert not set(FACTOR_NAMES) & set(ScoringWeights.model_fields)
    assert tuple(NEUTRAL_FACTORS) == FACTOR_NAMES


def test_named_indices_point_at_their_features():
    named = {
        "SEMANTIC_INDEX": "semantic",
        "LEXICAL_INDEX": "lexical",
        "EPISTEMIC_INDEX": "epistemic_weight",
        "TEMPORAL_INDEX": "temporal_affinity",
        "NODE_TYPE_INDEX": "node_type_boost",
    }
    for constant, name in named.items():
        assert TRACE_FEATURES[getattr(features, constant)] == name
    assert (
        features.FEATURE_COUNT
        == len(TRACE_FEATURES)
        == (len(WEIGHT_NAMES) + len(FACTOR_NAMES) + features.INTERACTION_COUNT)
    )


def test_every_weight_and_trace_field_has_one_projection_column():
    assert projection.FEATURE_COLUMNS == tuple(f"f_{name}" for name in TRACE_FIELDS)
    assert projection.WEIGHT_COLUMNS == tuple(
        f"w_{name}" for name in (*WEIGHT_NAMES, *features.INTERACTION_NAMES, *SCALAR_NAMES)
    )
    assert projection.float_columns(9) == (
        "score",
        *(f"f_{n}" for n in layout_for(9).trace_fields),
        *(f"w_{n}" for n in (*WEIGHT_NAMES, *SCALAR_NAMES)),
        "reranker_score",
    )
    floats = projection.FLOAT_COLUMNS
    assert len(set(floats)) == len(floats)
    for column in (*features.TRACE_FEATURE_COLUMNS, *features.ADDITIVE_WEIGHT_COLUMNS, *features.SCALAR_WEIGHT_COLUMNS):
        assert column in floats


def test_stored_projection_packs_feature_columns_so_no_migration_names_them():
    """Adding a feature changes the packed float block, never the table: the migrations (whose
    SQL is checksummed) list the projection row's columns, and no f_/w_ column among them."""
    table = next(m.sql for m in MIGRATIONS if "CREATE TABLE receipt_projections" in m.sql)
    body = table.split("CREATE TABLE receipt_projections (", 1)[1].split("PRIMARY KEY", 1)[0]
    added = [c for m in MIGRATIONS for c in re.findall(r"ALTER TABLE receipt_projections ADD COLUMN (\w+)", m.sql)]
    assert (*re.findall(r"^\s+(\w+) ", body, flags=re.MULTILINE), *added) == (
        *PROJECTION_COLUMNS,
        *PROJECTION_STATE_COLUMNS,
    )
    layout_columns = set(projection.FEATURE_COLUMNS) | set(projection.WEIGHT_COLUMNS)
    for migration in MIGRATIONS:
        named = set(re.findall(r"\b[fw]_\w+", migration.sql + migration.postgresql_extra))
        assert not named & layout_columns, migration.version


def test_neutral_factors_leave_the_weighted_sum_unchanged():
    rng = np.random.default_rng(3)
    additive = rng.random((5, len(WEIGHT_NAMES)))
    feats = np.hstack([additive, np.tile([NEUTRAL_FACTORS[n] for n in FACTOR_NAMES], (5, 1))])
    weights = np.tile(ScoringWeights().vector(), (5, 1))
    scores = weighted_base_scores(feats, weights, np.tile([0.15, 0.0], (5, 1)))  # no relevance floor
    expected = np.round(sum(weights[:, i] * additive[:, i] for i in range(len(WEIGHT_NAMES))), 10)
    assert np.array_equal(scores, expected)
