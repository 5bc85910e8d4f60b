"""Receipt schema versions: the version new receipts are written in, the versions that
introduced the parts replay and the projection read, and the current feature layout.

``model`` validates receipts by these (its docstring has the full version table); ``replay``
and ``projection`` read them too, and ``model`` imports those two to check itself, so the
numbers live here, below all three.
"""

from __future__ import annotations

from prme_core.features import layout_for

CURRENT_SCHEMA_VERSION = 10
MIN_SCHEMA_VERSION = 1
PROVENANCE_SINCE = 2  # score provenance, weight sets and the ranking policy
EXECUTION_SINCE = 3  # the execution descriptor
RANK_FUSION_SINCE = 9  # our receipts record formula-2 provenance from version 9 on
POOL_SINCE = 10  # interaction features in every trace and weight set, and the scored candidate pool

FEATURE_LAYOUT = layout_for(CURRENT_SCHEMA_VERSION)  # prme_core.features
TRACE_FIELDS: tuple[str, ...] = FEATURE_LAYOUT.trace_fields
