"""The columnar projection of a receipt's candidates, and the digest that binds it.

Learning reads numbers from ``receipt_projections`` instead of parsing receipt JSON: one row per
receipt whose candidate columns are packed little-endian arrays (a 50-candidate projection is
one insert, where 50 rows of 38 bound values cost DuckDB several milliseconds). To keep that
fast path fail-closed, every receipt carries ``projection_sha256``: a digest of exactly the
packed bytes. The receipt's checksum covers it, and the snapshot recomputes it from the row it
read, so an edited projection is detected without parsing the receipt.

The float columns follow the receipt version's feature layout (``features.layout_for``):
versions before 10 keep exactly their layout-1 columns (so their digests never change), version
10 adds the interaction features and weights. ``float_columns(version)`` names them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

import numpy as np

from prme_core.canonical import canonical_json
from prme_core.features import CURRENT_LAYOUT, FeatureLayout, layout_for
from prme_core.receipts.versions import PACKED_POOL_SINCE
from prme_core.types import sorted_unique

# The current layout's names (what learning remaps projections to); a stored projection's own
# columns are ``float_columns`` of its receipt version.
FEATURE_COLUMNS = CURRENT_LAYOUT.feature_columns  # f_<trace field>, in trace order
WEIGHT_COLUMNS = CURRENT_LAYOUT.weight_columns  # w_<additive weight>, then w_<scalar>
FLOAT_COLUMNS = ("score", *FEATURE_COLUMNS, *WEIGHT_COLUMNS, "reranker_score")


def _float_columns(layout: FeatureLayout) -> tuple[str, ...]:
    return ("score", *layout.feature_columns, *layout.weight_columns, "reranker_score")


def float_columns(schema_version: int) -> tuple[str, ...]:
    """The float columns of a projection of a receipt of ``schema_version``."""
    return _float_columns(layout_for(max(schema_version, 1)))


INT_COLUMNS = ("rank", "formula_version", "in_context", "has_content", "context_position", "token_cost")
TEXT_COLUMNS = ("node_id", "base_node_id", "adjustments")
CANDIDATE_COLUMNS = (*TEXT_COLUMNS, *INT_COLUMNS, *FLOAT_COLUMNS)


class Projectable(Protocol):
    """What the projection reads from a receipt. ``receipts.model.RetrievalReceipt`` has it; the
    model imports this module to check its own digest, so this module does not import the model."""

    schema_version: int
    request_id: UUID
    owner: str
    query: str
    scopes: Sequence[str]
    ranking_policy: str | None
    scoring: Any  # ``ScoringWeights``: its ``fusion``
    weight_sets: Sequence[Any]  # the applied ``ScoringWeights``
    candidates: Sequence[Any]  # ``ReceiptCandidate``s
    pool: Any  # version 11: a ``PoolSummary`` (its ``sha256`` enters the header)
    _columns: dict[str, list[Any]] | None  # the model's cache of ``candidate_columns``
    _packed: PackedProjection | None  # the model's cache of ``packed_projection``


def scope_key(scopes: Sequence[str]) -> str:
    """The exact normalized scope set as one string: sorted, unique, joined by '+'."""
    return "+".join(sorted_unique(scopes))


def receipt_header(receipt: Projectable) -> dict[str, Any]:
    """The projection's header; from version 11 on it names the packed pool's digest and replay
    flags, so the projection row binds the pool row (versions before 11 keep exactly their old
    header)."""
    header = {
        "schema_version": receipt.schema_version,
        "request_id": str(receipt.request_id),
        "owner": receipt.owner,
        "scope_key": scope_key(receipt.scopes),
        "query": receipt.query,
        "ranking_policy": receipt.ranking_policy or "",
        "fusion": receipt.scoring.fusion,
        "candidate_count": len(receipt.candidates),
    }
    if receipt.schema_version >= PACKED_POOL_SINCE:
        header["pool_sha256"] = receipt.pool.sha256
        header["pool_flags"] = pool_flags(receipt.pool.complete, receipt.pool.replayable)
    return header


POOL_COMPLETE, POOL_REPLAYABLE = 1, 2


def pool_flags(complete: bool, replayable: bool) -> int:
    """A version-11 pool's replay flags as the projection header records them (a bit each), so
    learning knows which pools it can re-rank exactly before it reads any."""
    return (POOL_COMPLETE if complete else 0) | (POOL_REPLAYABLE if replayable else 0)


def candidate_columns(receipt: Projectable) -> dict[str, list[Any]]:
    """Column lists of the projection, one entry per candidate in recorded order (computed once
    per receipt object: receipts are immutable)."""
    cached = receipt._columns
    if cached is None:
        cached = receipt._columns = _columns(receipt)
    return cached


def _columns(receipt: Projectable) -> dict[str, list[Any]]:
    layout = layout_for(max(receipt.schema_version, 1))
    feature_columns, weight_columns = layout.feature_columns, layout.weight_columns
    cols: dict[str, list[Any]] = {name: [] for name in (*TEXT_COLUMNS, *INT_COLUMNS, *_float_columns(layout))}
    nan = float("nan")
    weight_rows = [tuple(getattr(w, name) for name in layout.additive + layout.scalars) for w in receipt.weight_sets]
    for rank, c in enumerate(receipt.candidates):
        p = c.provenance
        cols["node_id"].append(str(c.node_id))
        cols["rank"].append(rank)
        cols["score"].append(c.score)
        cols["in_context"].append(int(c.in_context))
        cols["has_content"].append(int(c.has_content))
        cols["context_position"].append(-1 if c.context_position is None else c.context_position)
        cols["token_cost"].append(c.token_cost)
        cols["reranker_score"].append(nan if c.reranker_score is None else c.reranker_score)
        if p is None:
            cols["base_node_id"].append("")
            cols["formula_version"].append(0)
            cols["adjustments"].append("")
            for name in (*feature_columns, *weight_columns):
                cols[name].append(nan)
            continue
        cols["base_node_id"].append(str(p.base_node_id))
        cols["formula_version"].append(p.formula_version)
        cols["adjustments"].append(canonical_json([a.canonical_dict() for a in p.adjustments]).decode())
        for name, value in zip(feature_columns, p.trace.as_array(layout), strict=True):
            cols[name].append(value)
        for name, value in zip(weight_columns, weight_rows[p.weights], strict=True):
            cols[name].append(value)
    return cols


@dataclass(frozen=True)
class PackedProjection:
    """A receipt's candidate columns packed for storage: one row per receipt.

    ``int_columns`` holds the ``INT_COLUMNS`` as little-endian int64 arrays, column after
    column; ``float_columns`` the receipt version's ``float_columns`` as float64 arrays (absent
    values are NaN);
    the text columns are joined by U+001F. These bytes are exactly what the digest hashes.
    """

    header: dict[str, Any]
    int_columns: bytes
    float_columns: bytes
    node_ids: str
    base_node_ids: str
    adjustments: str

    def digest(self) -> str:
        h = hashlib.sha256(canonical_json(self.header))
        h.update(self.int_columns)
        h.update(self.float_columns)
        for text in (self.node_ids, self.base_node_ids, self.adjustments):
            h.update(text.encode("utf-8"))
            h.update(b"\x1e")
        return h.hexdigest()

    def int_block(self) -> np.ndarray:
        """The ``INT_COLUMNS`` as one (columns, candidates) int64 matrix."""
        return np.frombuffer(self.int_columns, dtype="<i8").reshape(
            len(INT_COLUMNS), int(self.header["candidate_count"])
        )

    @property
    def float_names(self) -> tuple[str, ...]:
        """The float column names of this projection's receipt version."""
        return float_columns(int(self.header["schema_version"]))

    def float_block(self) -> np.ndarray:
        """The ``float_names`` columns as one (columns, candidates) float64 matrix."""
        return np.frombuffer(self.float_columns, dtype="<f8").reshape(
            len(self.float_names), int(self.header["candidate_count"])
        )

    def arrays(self) -> dict[str, Any]:
        """Column name → numpy array (or list of strings for the text columns)."""
        n = int(self.header["candidate_count"])
        ints, floats = self.int_block(), self.float_block()
        out: dict[str, Any] = {name: ints[i] for i, name in enumerate(INT_COLUMNS)}
        out.update({name: floats[i] for i, name in enumerate(self.float_names)})
        texts = {"node_id": self.node_ids, "base_node_id": self.base_node_ids, "adjustments": self.adjustments}
        for name, text in texts.items():
            out[name] = text.split("\x1f") if n else []
        return out


def pack_columns(header: Mapping[str, Any], columns: Mapping[str, Sequence[Any]]) -> PackedProjection:
    n = int(header["candidate_count"])
    ints = np.asarray([columns[c] for c in INT_COLUMNS], dtype="<i8").reshape(len(INT_COLUMNS), n)
    names = float_columns(int(header["schema_version"]))
    floats = np.array([columns[c] for c in names], dtype="<f8").reshape(len(names), n)
    floats[np.isnan(floats)] = np.nan  # one NaN bit pattern
    return PackedProjection(
        dict(header),
        ints.tobytes(),
        floats.tobytes(),
        "\x1f".join(columns["node_id"]),
        "\x1f".join(columns["base_node_id"]),
        "\x1f".join(columns["adjustments"]),
    )


def packed_projection(receipt: Projectable) -> PackedProjection:
    """The receipt's packed projection, computed once per receipt object (receipts are
    immutable; ``RetrievalReceipt.model_copy`` with updates starts without it): building a
    receipt checks its digest and storing it writes the same bytes."""
    cached = receipt._packed
    if cached is None:
        cached = receipt._packed = pack_columns(receipt_header(receipt), candidate_columns(receipt))
    return cached


def projection_digest(receipt: Projectable) -> str:
    return packed_projection(receipt).digest()
