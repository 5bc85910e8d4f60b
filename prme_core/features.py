"""The ranking feature layout: which features a score is made of, in which order, and the names
every layer derives from them (receipt trace, projection columns, learning arrays, benchmarks).

Formula 1 (``retrieval.formula``) sums the additive features, each times its own weight (one
``ScoringWeights`` field and one ``RankingMultipliers`` factor per name), then, from layout 2 on,
the query–memory interaction features, each times its own bounded weight (a ``ScoringWeights``
field in [0, 0.5], outside the six that sum to 1 and never touched by multipliers); then it
applies the factor features, which have no weight: the sum times ``epistemic_weight``, plus
``temporal_boost`` × ``temporal_affinity``, times ``node_type_boost``. A receipt's trace records
the features in the order weights, factors, interactions (so the factor positions never move),
then the two ordering values (``path_score``, ``base_score``).

This module imports nothing from ``prme_core`` so that storage, receipts, retrieval and learning
may all import it. ``RECEIPT_LAYOUTS`` records which layout each receipt schema version uses;
``receipts.versions`` binds the current one to ``CURRENT_SCHEMA_VERSION``.

A layout travels with every feature array (a pool's columns, a scored pool, a pool set, judged
arrays): stored data is read with the layout its record names (``layout_for`` its receipt
version), never with the current one, and an array is moved to another layout by feature name
(``FeatureLayout.remap``). Rules where two layouts differ: a feature the source lacks takes its
neutral value (0 for additive features, ``NEUTRAL_FACTORS`` for factors) and a weight a weight
set lacks is 0 (``FeatureLayout.weight_vector``), which leave formula 1 bit-identical; a feature
the target lacks may be dropped only where it holds its neutral value everywhere, otherwise
``LayoutMismatch`` (it would change scores). A profile names weights by field, so it applies to
any layout: a weight it does not name keeps multiplier 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEUTRAL_FACTORS: dict[str, float] = {"epistemic_weight": 1.0, "temporal_affinity": 0.0, "node_type_boost": 1.0}
"""Factor values that leave the additive score unchanged (synthetic receipts, benchmarks, remapping)."""


class LayoutMismatch(ValueError):
    """An array cannot be moved to another feature layout without changing scores (a feature the
    target lacks holds non-neutral values), or no registered layout fits a record."""


@dataclass(frozen=True)
class FeatureLayout:
    """The features and weights a range of receipt schema versions records, in order."""

    weights: tuple[str, ...]  # additive features: each has a weight and a multiplier
    factors: tuple[str, ...]  # multiplicative / bonus features: no weight
    interactions: tuple[str, ...] = ()  # additive query–memory features: a bounded weight, no multiplier
    scalars: tuple[str, ...] = ("temporal_boost", "relevance_floor")  # scoring values recorded beside the weights
    ordering: tuple[str, ...] = ("path_score", "base_score")  # trace values that are not formula inputs

    @property
    def features(self) -> tuple[str, ...]:
        """Formula-1 inputs: the columns of the (n, features) matrix (weighted, factors, interactions)."""
        return self.weights + self.factors + self.interactions

    @property
    def additive(self) -> tuple[str, ...]:
        """Every feature that has a weight, in summation order (the applied weight vector)."""
        return self.weights + self.interactions

    @property
    def trace_fields(self) -> tuple[str, ...]:
        """A score trace's positional array."""
        return self.features + self.ordering

    @property
    def feature_columns(self) -> tuple[str, ...]:
        """Projection columns of the trace (``f_<name>``)."""
        return tuple(feature_column(name) for name in self.trace_fields)

    @property
    def weight_columns(self) -> tuple[str, ...]:
        """Projection columns of the applied weight set (``w_<name>``): additive weights, then scalars."""
        return tuple(weight_column(name) for name in self.additive + self.scalars)

    @property
    def width(self) -> int:
        """Columns of this layout's (n, features) matrix."""
        return len(self.features)

    @property
    def interaction_offset(self) -> int:
        """Column of the first interaction feature (interactions follow the factors)."""
        return len(self.weights) + len(self.factors)

    def index(self, name: str) -> int:
        """Column of feature ``name`` in this layout's matrix."""
        return self.features.index(name)

    def neutral(self, name: str) -> float:
        """The value of ``name`` that leaves formula 1 unchanged: 0 for an additive feature,
        its ``NEUTRAL_FACTORS`` value for a factor."""
        return NEUTRAL_FACTORS[name] if name in self.factors else 0.0

    def weight_vector(self, weights: object) -> tuple[float, ...]:
        """The applied weights of a weight set (a ``ScoringWeights``) in ``additive`` order; a
        feature the weight set has no field for has weight 0 (it adds nothing)."""
        return tuple(float(getattr(weights, name, 0.0)) for name in self.additive)

    def remap(self, matrix: np.ndarray, source: FeatureLayout) -> np.ndarray:
        """``matrix`` (n, ``source.width``) as this layout's (n, width) matrix, column by name
        (see the module docstring for the rules); the matrix itself when the layouts agree."""
        if source.features == self.features:
            return matrix
        if matrix.shape[1] != source.width:
            raise LayoutMismatch(f"a matrix of {matrix.shape[1]} columns is not in a layout of {source.width} features")
        for j, name in enumerate(source.features):
            if name not in self.features and np.any(matrix[:, j] != source.neutral(name)):
                raise LayoutMismatch(
                    f"feature {name!r} is not in the target layout {self.features} but holds non-neutral values; "
                    "read these arrays in a layout that has it"
                )
        out = np.empty((matrix.shape[0], self.width), dtype=np.float64)
        for j, name in enumerate(self.features):
            out[:, j] = matrix[:, source.index(name)] if name in source.features else self.neutral(name)
        return out


def feature_column(name: str) -> str:
    return f"f_{name}"


def weight_column(name: str) -> str:
    return f"w_{name}"


_LAYOUT_1 = FeatureLayout(
    weights=("semantic", "lexical", "graph", "recency", "salience", "confidence"),
    factors=("epistemic_weight", "temporal_affinity", "node_type_boost"),
)

_LAYOUT_2 = FeatureLayout(
    weights=_LAYOUT_1.weights,
    factors=_LAYOUT_1.factors,
    interactions=("term_coverage", "bigram_overlap", "entity_match"),
)

RECEIPT_LAYOUTS: tuple[tuple[int, FeatureLayout], ...] = ((1, _LAYOUT_1), (10, _LAYOUT_2))
"""(first receipt schema version, layout), ascending. Version 1 records no provenance (its
projection holds NaN in these columns); versions 2–9 use layout 1; version 10 adds the three
interaction features (``retrieval.interaction``). A layout-1 receipt means interaction features
and weights of 0, which leave formula 1 bit-identical (x + 0·0 = x). A version that changes the
features adds an entry."""


def layout_for(schema_version: int) -> FeatureLayout:
    """The layout a receipt of ``schema_version`` records (read from ``RECEIPT_LAYOUTS`` at call
    time: the one place layouts are registered)."""
    found = [layout for since, layout in RECEIPT_LAYOUTS if since <= schema_version]
    if not found:
        raise ValueError(
            f"no feature layout for receipt schema version {schema_version}; the first is {RECEIPT_LAYOUTS[0][0]}"
        )
    return found[-1]


def current_layout() -> FeatureLayout:
    """The newest registered layout (read at call time): what learning arrays are built in when
    their caller names none."""
    return RECEIPT_LAYOUTS[-1][1]


def layout_of_width(width: int, *, since: int = 1) -> FeatureLayout:
    """The one layout of receipt versions ≥ ``since`` whose matrix has ``width`` columns, for
    records that store only a width (a packed pool's header); ``LayoutMismatch`` when none or
    several fit (then the caller must pass the record's ``layout_for`` its version)."""
    found = {layout for start, layout in RECEIPT_LAYOUTS if layout.width == width and _covers(start, since)}
    if len(found) != 1:
        widths = sorted({layout.width for _, layout in RECEIPT_LAYOUTS})
        raise LayoutMismatch(
            f"{len(found) or 'no'} registered feature layouts have {width} features (widths: {widths}); "
            "pass the layout of the record's receipt version"
        )
    return found.pop()


def _covers(start: int, since: int) -> bool:
    """Whether the layout registered at ``start`` is used by some version ≥ ``since``."""
    later = [s for s, _ in RECEIPT_LAYOUTS if s > start]
    return not later or min(later) > since


CURRENT_LAYOUT = RECEIPT_LAYOUTS[-1][1]

# The layout this code computes and its models hold (new receipts, traces, weight fields,
# benchmarks), by name. Never read stored data with these: resolve the record's layout
# (``layout_for`` its version) and remap by name.
WEIGHT_NAMES = CURRENT_LAYOUT.weights
INTERACTION_NAMES = CURRENT_LAYOUT.interactions
ADDITIVE_NAMES = CURRENT_LAYOUT.additive
FACTOR_NAMES = CURRENT_LAYOUT.factors
SCALAR_NAMES = CURRENT_LAYOUT.scalars
TRACE_FEATURES = CURRENT_LAYOUT.features
TRACE_FIELDS = CURRENT_LAYOUT.trace_fields
WEIGHT_COUNT = len(WEIGHT_NAMES)
FEATURE_COUNT = len(TRACE_FEATURES)
INTERACTION_COUNT = len(INTERACTION_NAMES)
INTERACTION_OFFSET = len(WEIGHT_NAMES) + len(FACTOR_NAMES)
"""Column of the first interaction feature in a feature matrix (interactions follow the factors)."""

# Positions in the formula-1 feature matrix of the features the formula names.
SEMANTIC_INDEX = TRACE_FEATURES.index("semantic")
LEXICAL_INDEX = TRACE_FEATURES.index("lexical")
EPISTEMIC_INDEX = TRACE_FEATURES.index("epistemic_weight")
TEMPORAL_INDEX = TRACE_FEATURES.index("temporal_affinity")
NODE_TYPE_INDEX = TRACE_FEATURES.index("node_type_boost")

# Projection column names (``receipts.projection`` packs them; learning reads them back).
FEATURE_COLUMNS = CURRENT_LAYOUT.feature_columns
WEIGHT_COLUMNS = CURRENT_LAYOUT.weight_columns
TRACE_FEATURE_COLUMNS = tuple(feature_column(name) for name in TRACE_FEATURES)
ADDITIVE_WEIGHT_COLUMNS = tuple(weight_column(name) for name in ADDITIVE_NAMES)
SCALAR_WEIGHT_COLUMNS = tuple(weight_column(name) for name in SCALAR_NAMES)
