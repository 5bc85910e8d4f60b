"""Receipt schema versions: the version new receipts are written in, the versions that
introduced the parts replay and the projection read, and the current feature layout.

``model`` validates receipts by these (its docstring has the full version table); ``replay``
and ``projection`` read them too, and ``model`` imports those two to check itself, so the
numbers live here, below all three.
"""

from __future__ import annotations

from prme_core.features import layout_for

CURRENT_SCHEMA_VERSION = 11
MIN_SCHEMA_VERSION = 1
PROVENANCE_SINCE = 2  # score provenance, weight sets and the ranking policy
EXECUTION_SINCE = 3  # the execution descriptor
RANK_FUSION_SINCE = 9  # our receipts record formula-2 provenance from version 9 on
POOL_SINCE = 10  # interaction features in every trace and weight set, and the scored candidate pool (inline)
PACKED_POOL_SINCE = 11  # the pool's columns in a bound binary row; the receipt records its summary and digest

FEATURE_LAYOUT = layout_for(CURRENT_SCHEMA_VERSION)  # prme_core.features
TRACE_FIELDS: tuple[str, ...] = FEATURE_LAYOUT.trace_fields
