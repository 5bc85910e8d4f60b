"""The scored candidate pool a receipt records, so learning can re-rank it exactly (pool replay).

Members are the first ``min(size, depth)`` pool members in base order (formula-1 score with the
current-update operation, then path score, then id). Together with the receipt's request
(scoring, packing, ``min_score``, limit, recorded multipliers) they are everything
``retrieval.pool_replay`` needs to re-rank the pool under other weights through the pipeline's
own ranking code:

* ``node_ids`` and ``features`` — each member's identity and trace features, in the order of
  the feature layout the receipt's version records (``PoolColumns.layout``: ``layout_for`` the
  version, never the current layout, so stored pools read the same after a layout change);
* ``paths`` — generation paths as a bit mask (``retrieval.ranking.PATH_BITS``); the path score
  is a function of them;
* ``cross_scope`` / ``update_eligible`` — members that are cross-scope hints, and that the
  current-update operation may boost (current-state query, newest memory time, update wording);
* ``current_state`` / ``episodic`` — which query-specific recency redistribution applies;
* ``neighbours`` — when session inheritance is on, each member's eligible session neighbours
  within the window, as indices: below the member count a member, otherwise
  ``outside_ids[i - members]`` (neighbours may lie outside the pool), with their cross-scope
  flags in ``outside_cross_scope``.

Two representations, one set of rules (``PoolColumns.check``):

* **version 10** (``CandidatePool``): the arrays inline in the receipt's canonical JSON. Kept
  readable so version-10 receipts keep their bytes and checksums; no longer written.
* **version 11** (``PoolSummary`` + ``PoolColumns``): the receipt's JSON records only the
  summary (depth, size, flags, counts) and ``sha256`` of the packed columns; the columns are
  stored beside the receipt's projection in one binary row (``PoolColumns.pack``) — about a
  third of the JSON's size, written without encoding thousands of floats as text, and read by
  learning without parsing JSON. The receipt checksum covers the digest, so a changed column
  fails closed.

Re-ranking is exact only when ``complete`` (size ≤ depth): a truncated pool lacks members that
other weights could promote. ``replayable`` is false, with a reason, when the request used a
step whose inputs are not recorded (neural reranker, episode routing) or rank fusion.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from uuid import UUID

import numpy as np
from pydantic import Field, model_validator

from prme_core.canonical import canonical_json, parse_json
from prme_core.features import CURRENT_LAYOUT, FeatureLayout, LayoutMismatch, layout_for, layout_of_width
from prme_core.receipts.stored_pool import STORED_POOL_MAGIC, packed_from_stored, stored_pool  # noqa: F401 (re-exported)
from prme_core.receipts.versions import PACKED_POOL_SINCE, POOL_SINCE
from prme_core.types import FrozenModel, Sha256Hex

PoolReason = Literal["neural_reranker", "episode_routing", "rank_fusion", "not_recorded"]
MAX_POOL_DEPTH = 1000
PACKED_POOL_FORMAT = 1
Index = Annotated[int, Field(ge=0)]


@dataclass(frozen=True, eq=False)
class PoolColumns:
    """The pool's members as arrays (both versions): what replay and learning read.

    Node identities are kept as packed 16-byte UUIDs (``node_bytes``, ``outside_bytes``;
    ``node_ids``/``outside_ids`` decode them on first use), so reading thousands of pools never
    builds millions of UUID objects. ``neighbour_offsets`` is empty when session inheritance is
    off; otherwise member ``i``'s neighbours are ``neighbour_refs[offsets[i]:offsets[i + 1]]``
    (indices into members, then outside nodes). ``layout`` is the feature layout of
    ``features`` (the one the pool's receipt version records; new pools: the current one)."""

    node_bytes: bytes
    features: np.ndarray  # (members, features) float64
    paths: np.ndarray  # (members,) uint8 path masks
    cross_scope: np.ndarray  # (members,) bool
    update_eligible: np.ndarray  # (members,) bool
    neighbour_offsets: np.ndarray  # (members + 1,) int64, or (0,)
    neighbour_refs: np.ndarray  # int64
    outside_bytes: bytes
    outside_cross_scope: np.ndarray  # (outside,) bool
    replay: dict[str, Any] = field(default_factory=dict)
    """What re-ranking the pool needs from its request besides the arrays (``replay_context``):
    configured scoring, recorded multipliers, session-inheritance settings, ``min_score``, the
    limit and the pool's flags. Packed with the columns, so learning reads one row per request."""
    layout: FeatureLayout = CURRENT_LAYOUT
    _decoded: dict[str, tuple[UUID, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, node_ids: tuple[UUID, ...], outside_ids: tuple[UUID, ...], **arrays: np.ndarray) -> PoolColumns:
        return cls(
            node_bytes=b"".join(u.bytes for u in node_ids),
            outside_bytes=b"".join(u.bytes for u in outside_ids),
            **arrays,
        )

    @property
    def members(self) -> int:
        return len(self.node_bytes) // 16

    @property
    def outside(self) -> int:
        return len(self.outside_bytes) // 16

    @property
    def node_ids(self) -> tuple[UUID, ...]:
        return self._ids("node_bytes")

    @property
    def outside_ids(self) -> tuple[UUID, ...]:
        return self._ids("outside_bytes")

    def _ids(self, name: str) -> tuple[UUID, ...]:
        found = self._decoded.get(name)
        if found is None:
            raw = getattr(self, name)
            found = self._decoded[name] = tuple(UUID(bytes=raw[i : i + 16]) for i in range(0, len(raw), 16))
        return found

    def id_keys(self) -> np.ndarray:
        """(members + outside, 2) uint64: each node id as (high, low) 64-bit halves, which sort
        exactly like the UUID's integer (the pipeline's final tie-break)."""
        raw = np.frombuffer(self.node_bytes + self.outside_bytes, dtype=">u8").reshape(-1, 2)
        return raw.astype(np.uint64)

    @property
    def has_neighbours(self) -> bool:
        return self.neighbour_offsets.size > 0

    def neighbours_of(self, i: int) -> np.ndarray:
        if not self.has_neighbours:
            return self.neighbour_refs[:0]
        return self.neighbour_refs[self.neighbour_offsets[i] : self.neighbour_offsets[i + 1]]

    def check(self) -> PoolColumns:
        """Raise ``ValueError`` unless the arrays form a consistent pool (the rules both
        representations share); returns itself. Vectorized: learning checks every pool it reads."""
        m, o = self.members, self.outside
        layout = self.layout
        if len(self.node_bytes) % 16 or len(self.outside_bytes) % 16:
            raise ValueError("pool node ids are 16-byte UUIDs")
        if self.features.shape != (m, layout.width):
            raise ValueError(f"each pool member records {layout.width} features in the order {layout.features}")
        if len(self.paths) != m or len(self.cross_scope) != m or len(self.update_eligible) != m:
            raise ValueError("pool.features and pool.paths hold one entry per member")
        if len(self.outside_cross_scope) != o:
            raise ValueError("pool.outside_cross_scope holds one flag per outside node")
        raw = self.node_bytes + self.outside_bytes
        if len({raw[i : i + 16] for i in range(0, len(raw), 16)}) != m + o:
            raise ValueError("pool members and outside neighbours are distinct nodes")
        if m and not np.all(np.isfinite(self.features)):
            raise ValueError("pool features are finite numbers")
        interactions = self.features[:, layout.interaction_offset : layout.width]
        if m and not np.all((interactions >= 0.0) & (interactions <= 1.0)):
            raise ValueError("interaction features lie in [0, 1]")
        if m and not np.all((self.paths >= 1) & (self.paths <= 7)):
            raise ValueError("pool.paths are generation-path masks in 1..7")
        if not self.has_neighbours:
            if self.neighbour_refs.size or o:
                raise ValueError("outside nodes are session neighbours; this pool records none")
            return self
        offsets, refs = self.neighbour_offsets, self.neighbour_refs
        if offsets.size != m + 1 or offsets[0] != 0 or offsets[-1] != refs.size or np.any(np.diff(offsets) < 0):
            raise ValueError("pool.neighbours holds one list per member, or none when session inheritance is off")
        bound = m + o
        owner = np.repeat(np.arange(m), np.diff(offsets))
        bad = (refs < 0) | (refs >= bound) | (refs == owner)
        keys = owner * bound + refs
        if np.any(bad) or np.unique(keys).size != keys.size:
            first = int(owner[np.flatnonzero(bad)[0]]) if np.any(bad) else int(owner[0])
            raise ValueError(f"pool.neighbours[{first}] names a member or outside node that does not exist")
        if o and np.unique(refs[refs >= m]).size != o:
            raise ValueError("every outside node is some member's session neighbour")
        return self

    # --- version 11: the packed binary row ----------------------------------------------

    def pack(self) -> bytes:
        """The stored form: a length-prefixed canonical-JSON header, then little-endian blocks
        (ids as 16-byte UUIDs, each feature column as float64 — a column whose members all
        share one value is stored once and named in ``constant`` —, path masks, flags, the
        neighbour offsets and references as int32)."""
        m = self.members
        f = np.ascontiguousarray(self.features, dtype="<f8").reshape(m, self.features.shape[1])
        constant = np.flatnonzero(np.all(f == f[0], axis=0)).tolist() if m else []
        header = {
            "format": PACKED_POOL_FORMAT,
            "members": m,
            "outside": self.outside,
            "features": int(f.shape[1]),
            "constant": constant,
            "neighbour_refs": int(self.neighbour_refs.size) if self.has_neighbours else -1,
            "replay": self.replay,
        }
        head = canonical_json(header)
        blocks = [struct.pack("<I", len(head)), head]
        blocks += [self.node_bytes, self.outside_bytes]
        shared = set(constant)
        for j in range(f.shape[1]):
            blocks.append(f[:1, j].tobytes() if j in shared else f[:, j].tobytes())
        flags = self.cross_scope.astype(np.uint8) | (self.update_eligible.astype(np.uint8) << 1)
        blocks += [
            self.paths.astype(np.uint8).tobytes(),
            flags.tobytes(),
            self.outside_cross_scope.astype(np.uint8).tobytes(),
        ]
        if self.has_neighbours:
            blocks += [self.neighbour_offsets.astype("<i4").tobytes(), self.neighbour_refs.astype("<i4").tobytes()]
        return b"".join(blocks)

    @classmethod
    def unpack(cls, data: bytes, layout: FeatureLayout | None = None) -> PoolColumns:
        """Parse and check a packed row whose features are laid out as ``layout`` (the receipt
        version's; None: the one layout of a packed-pool version with the header's width —
        ``features.layout_of_width``); raises ``ValueError`` naming what is wrong."""
        reader = _Reader(data)
        (head_length,) = struct.unpack("<I", reader.take(4))
        try:
            header = parse_json(reader.take(head_length))
        except ValueError as exc:
            raise ValueError(f"the packed pool header is not JSON: {exc}") from None
        expected = {"format", "members", "outside", "features", "constant", "neighbour_refs", "replay"}
        if not isinstance(header, dict) or set(header) != expected or header["format"] != PACKED_POOL_FORMAT:
            raise ValueError(
                f"the packed pool header must be format {PACKED_POOL_FORMAT} with fields {sorted(expected)}"
            )
        m, o, width, refs = (header[k] for k in ("members", "outside", "features", "neighbour_refs"))
        constant = header["constant"]
        ints = (m, o, width, refs)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in ints) or min(m, o, width) < 0 or refs < -1:
            raise ValueError("the packed pool header's counts are not non-negative integers")
        if (
            not isinstance(constant, list)
            or constant != sorted(set(constant))
            or any(not isinstance(j, int) or not 0 <= j < width for j in constant)
        ):
            raise ValueError("the packed pool header's constant columns are not sorted column indices")
        node_bytes = reader.take(16 * m)
        outside_bytes = reader.take(16 * o)
        # The feature blocks in one read: stored columns hold m values, constant columns one.
        sizes = np.where(np.isin(np.arange(width), constant), 1, m)
        block = reader.floats(int(sizes.sum()))
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        rows = np.arange(m)[:, None] * (sizes[None, :] > 1)  # constant columns repeat their value
        features = block[starts[None, :] + rows] if m else np.zeros((0, width))
        paths = reader.bytes_array(m).copy()
        flags = reader.bytes_array(m)
        outside_cross = reader.bytes_array(o)
        if np.any(flags > 3) or np.any(outside_cross > 1):
            raise ValueError("the packed pool's flags hold values other than 0 and 1")
        if refs >= 0:
            offsets = reader.ints(m + 1).astype(np.int64)
            neighbour_refs = reader.ints(refs).astype(np.int64)
        else:
            offsets = neighbour_refs = np.zeros(0, dtype=np.int64)
        reader.finish()
        if layout is None:
            try:
                layout = layout_of_width(width, since=PACKED_POOL_SINCE)
            except LayoutMismatch as exc:
                raise ValueError(f"the packed pool's {width} feature columns name no single layout ({exc})") from None
        return cls(
            node_bytes=node_bytes,
            features=features,
            paths=paths,
            cross_scope=(flags & 1).astype(bool),
            update_eligible=(flags & 2).astype(bool),
            neighbour_offsets=offsets,
            neighbour_refs=neighbour_refs,
            outside_bytes=outside_bytes,
            outside_cross_scope=outside_cross.astype(bool),
            replay=header["replay"],
            layout=layout,
        ).check()

    # --- version 10: the inline model ---------------------------------------------------

    @classmethod
    def from_inline(cls, pool: CandidatePool, replay: dict[str, Any] | None = None) -> PoolColumns:
        m = len(pool.node_ids)
        layout = CandidatePool.layout()
        offsets: list[int] = [0]
        refs: list[int] = []
        for own in pool.neighbours:
            refs.extend(own)
            offsets.append(len(refs))
        return cls.of(
            tuple(pool.node_ids),
            tuple(pool.outside_ids),
            features=np.array(pool.features, dtype=np.float64).reshape(m, -1) if m else np.zeros((0, layout.width)),
            paths=np.array(pool.paths, dtype=np.uint8),
            cross_scope=_mask(pool.cross_scope, m),
            update_eligible=_mask(pool.update_eligible, m),
            neighbour_offsets=np.array(offsets if pool.neighbours else [], dtype=np.int64),
            neighbour_refs=np.array(refs, dtype=np.int64),
            outside_cross_scope=_mask(pool.outside_cross_scope, len(pool.outside_ids)),
            replay=replay or {},
            layout=layout,
        )


def replay_context(
    *,
    scoring: Any,
    multipliers: dict[str, Any] | None,
    packing: Any,
    min_score: float,
    result_limit: int,
    current_state: bool,
    episodic: bool,
    complete: bool,
    replayable: bool,
) -> dict[str, Any]:
    """The request facts a pool replay needs (``PoolColumns.replay``), as JSON values: the
    configured ``scoring`` (a ``ScoringWeights``), the recorded ``multipliers`` (their stored
    mapping, or None), session inheritance from ``packing`` (a ``PackingConfig``), the cut-off
    and limit, and the pool's flags."""
    return {
        "scoring": scoring.model_dump(mode="json"),
        "multipliers": None if multipliers is None else dict(multipliers),
        "session_top_k": packing.session_context_top_k,
        "session_decay": packing.session_context_score_decay,
        "min_score": min_score,
        "limit": result_limit,
        "current_state": current_state,
        "episodic": episodic,
        "complete": complete,
        "replayable": replayable,
    }


def pool_digest(packed: bytes) -> str:
    """SHA-256 of a packed pool row (what a version-11 receipt's ``pool.sha256`` records)."""
    return hashlib.sha256(packed).hexdigest()


def _mask(indices: tuple[int, ...], n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[list(indices)] = True
    return out


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = memoryview(data), 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ValueError("the packed pool is truncated")
        out = self.data[self.at : self.at + n].tobytes()
        self.at += n
        return out

    def _array(self, dtype: str, count: int, width: int) -> np.ndarray:
        if count < 0 or self.at + width * count > len(self.data):
            raise ValueError("the packed pool is truncated")
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += width * count
        return out

    def floats(self, count: int) -> np.ndarray:
        return self._array("<f8", count, 8)

    def bytes_array(self, count: int) -> np.ndarray:
        return self._array("u1", count, 1)

    def ints(self, count: int) -> np.ndarray:
        return self._array("<i4", count, 4)

    def finish(self) -> None:
        if self.at != len(self.data):
            raise ValueError(f"the packed pool has {len(self.data) - self.at} bytes past its last block")


def _sorted_unique_in_range(values: tuple[int, ...], bound: int, name: str) -> None:
    if list(values) != sorted(set(values)) or (values and values[-1] >= bound):
        raise ValueError(f"pool.{name} must be sorted unique indices below {bound}")


class _PoolFacts(FrozenModel):
    """What both representations record in the receipt's JSON about the pool as a whole."""

    depth: int = Field(ge=0, le=MAX_POOL_DEPTH)
    size: int = Field(ge=0)
    complete: bool
    replayable: bool
    reason: PoolReason | None = None
    current_state: bool
    episodic: bool

    @model_validator(mode="before")
    @classmethod
    def _every_field(cls, data: Any) -> Any:
        if isinstance(data, dict):
            missing = [f for f in cls.model_fields if f != "reason" and f not in data]
            if missing:
                raise ValueError(f"a candidate pool must record {missing[0]} explicitly")
        return data

    def _check_facts(self, members: int) -> None:
        if self.complete != (self.size <= self.depth):
            raise ValueError("pool.complete must say whether the pool size is at most its depth")
        if members != min(self.size, self.depth):
            raise ValueError("a pool records min(size, depth) members")
        if self.replayable == (self.reason is not None):
            raise ValueError("a pool names a reason exactly when it is not replayable")

    def canonical_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class CandidatePool(_PoolFacts):
    """The version-10 pool: the arrays inline (see the module docstring). Every field is
    required: a pool missing one fails to load."""

    node_ids: tuple[UUID, ...]
    features: tuple[tuple[float, ...], ...]
    paths: tuple[Annotated[int, Field(ge=1, le=7)], ...]
    cross_scope: tuple[Index, ...]
    update_eligible: tuple[Index, ...]
    neighbours: tuple[tuple[Index, ...], ...]
    outside_ids: tuple[UUID, ...]
    outside_cross_scope: tuple[Index, ...]

    @staticmethod
    def layout() -> FeatureLayout:
        """The feature layout of an inline pool: version 10's (the only version that writes one)."""
        return layout_for(POOL_SINCE)

    @model_validator(mode="after")
    def _consistent(self) -> CandidatePool:
        m = len(self.node_ids)
        self._check_facts(m)
        if len(self.features) != m or len(self.paths) != m:
            raise ValueError("pool.features and pool.paths hold one entry per member")
        layout = self.layout()
        if any(len(row) != layout.width for row in self.features):
            raise ValueError(f"each pool member records {layout.width} features in the order {layout.features}")
        _sorted_unique_in_range(self.cross_scope, m, "cross_scope")
        _sorted_unique_in_range(self.update_eligible, m, "update_eligible")
        _sorted_unique_in_range(self.outside_cross_scope, len(self.outside_ids), "outside_cross_scope")
        if self.neighbours and len(self.neighbours) != m:
            raise ValueError("pool.neighbours holds one list per member, or none when session inheritance is off")
        PoolColumns.from_inline(self).check()
        return self

    @property
    def members(self) -> int:
        return len(self.node_ids)

    @property
    def outside(self) -> int:
        return len(self.outside_ids)

    @property
    def has_neighbours(self) -> bool:
        return bool(self.neighbours)


class PoolSummary(_PoolFacts):
    """The version-11 pool as the receipt's JSON records it: the facts, the member and outside
    counts, whether neighbours are recorded, and ``sha256`` of the packed columns."""

    members: int = Field(ge=0)
    outside: int = Field(ge=0)
    has_neighbours: bool
    sha256: Sha256Hex

    @model_validator(mode="after")
    def _consistent(self) -> PoolSummary:
        self._check_facts(self.members)
        if self.outside and not self.has_neighbours:
            raise ValueError("outside nodes are session neighbours; this pool records none")
        return self

    @classmethod
    def describe(
        cls,
        columns: PoolColumns,
        packed: bytes,
        *,
        depth: int,
        size: int,
        reason: PoolReason | None = None,
        current_state: bool = False,
        episodic: bool = False,
    ) -> PoolSummary:
        """The summary of ``columns`` (stored as ``packed``) for a pool of ``size`` members
        recorded to ``depth``; a pool is replayable exactly when no ``reason`` says otherwise."""
        return cls(
            depth=depth,
            size=size,
            complete=size <= depth,
            replayable=reason is None,
            reason=reason,
            current_state=current_state,
            episodic=episodic,
            members=columns.members,
            outside=columns.outside,
            has_neighbours=columns.has_neighbours,
            sha256=pool_digest(packed),
        )

    def matches(self, columns: PoolColumns) -> bool:
        return (columns.members, columns.outside, columns.has_neighbours) == (
            self.members,
            self.outside,
            self.has_neighbours,
        )


def unrecorded_pool(
    size: int,
    *,
    scoring: Any,
    packing: Any,
    min_score: float,
    result_limit: int,
    multipliers: dict[str, Any] | None = None,
    reason: PoolReason = "not_recorded",
) -> tuple[PoolSummary, PoolColumns, bytes]:
    """A depth-0 version-11 pool: only its size is known (synthetic receipts, recording off)."""
    context = replay_context(
        scoring=scoring,
        multipliers=multipliers,
        packing=packing,
        min_score=min_score,
        result_limit=result_limit,
        current_state=False,
        episodic=False,
        complete=size == 0,
        replayable=False,
    )
    columns = dataclasses.replace(empty_columns(), replay=context)
    packed = columns.pack()
    return PoolSummary.describe(columns, packed, depth=0, size=size, reason=reason), columns, packed


def empty_columns(layout: FeatureLayout = CURRENT_LAYOUT) -> PoolColumns:
    none = np.zeros(0, dtype=bool)
    return PoolColumns(
        node_bytes=b"",
        features=np.zeros((0, layout.width)),
        paths=np.zeros(0, dtype=np.uint8),
        cross_scope=none,
        update_eligible=none,
        neighbour_offsets=np.zeros(0, dtype=np.int64),
        neighbour_refs=np.zeros(0, dtype=np.int64),
        outside_bytes=b"",
        outside_cross_scope=none,
        layout=layout,
    )
