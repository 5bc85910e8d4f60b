"""The scored candidate pool a version-10 receipt records (ids, features and flags; no text).

Members are the first ``min(size, depth)`` pool members in base order (formula-1 score with the
current-update operation, then path score, then id), recorded as parallel arrays. Together with
the receipt's request (scoring, packing, ``min_score``, limit, recorded multipliers) they are
everything ``retrieval.pool_replay`` needs to re-rank the pool under other weights through the
pipeline's own ranking code:

* ``features`` — each member's trace features (the layout's ``features`` order);
* ``paths`` — generation paths as a bit mask (``retrieval.ranking.PATH_BITS``); the path score
  is a function of them;
* ``cross_scope`` / ``update_eligible`` — member indices that are cross-scope hints, and that the
  current-update operation may boost (current-state query, newest memory time, update wording);
* ``current_state`` / ``episodic`` — which query-specific recency redistribution applies;
* ``neighbours`` — when session inheritance is on, each member's eligible session neighbours
  within the window, as indices: below the member count a member, otherwise
  ``outside_ids[i - members]`` (neighbours may lie outside the pool), with their cross-scope
  flags in ``outside_cross_scope``.

Re-ranking is exact only when ``complete`` (size ≤ depth): a truncated pool lacks members that
other weights could promote. ``replayable`` is false, with a reason, when the request used a
step whose inputs are not recorded (neural reranker, episode routing) or rank fusion.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, model_validator

from prme_core.receipts.versions import FEATURE_LAYOUT
from prme_core.types import FrozenModel

PoolReason = Literal["neural_reranker", "episode_routing", "rank_fusion", "not_recorded"]
_INTERACTIONS = slice(len(FEATURE_LAYOUT.weights) + len(FEATURE_LAYOUT.factors), len(FEATURE_LAYOUT.features))
MAX_POOL_DEPTH = 1000
Index = Annotated[int, Field(ge=0)]


def _sorted_unique_in_range(values: tuple[int, ...], bound: int, name: str) -> None:
    if list(values) != sorted(set(values)) or (values and values[-1] >= bound):
        raise ValueError(f"pool.{name} must be sorted unique indices below {bound}")


class CandidatePool(FrozenModel):
    """See the module docstring. Every field is required: a pool missing one fails to load."""

    depth: int = Field(ge=0, le=MAX_POOL_DEPTH)
    size: int = Field(ge=0)
    complete: bool
    replayable: bool
    reason: PoolReason | None = None
    current_state: bool
    episodic: bool
    node_ids: tuple[UUID, ...]
    features: tuple[tuple[float, ...], ...]
    paths: tuple[Annotated[int, Field(ge=1, le=7)], ...]
    cross_scope: tuple[Index, ...]
    update_eligible: tuple[Index, ...]
    neighbours: tuple[tuple[Index, ...], ...]
    outside_ids: tuple[UUID, ...]
    outside_cross_scope: tuple[Index, ...]

    @model_validator(mode="before")
    @classmethod
    def _every_field(cls, data: Any) -> Any:
        if isinstance(data, dict):
            missing = [f for f in cls.model_fields if f != "reason" and f not in data]
            if missing:
                raise ValueError(f"a candidate pool must record {missing[0]} explicitly")
        return data

    @model_validator(mode="after")
    def _consistent(self) -> CandidatePool:
        m = len(self.node_ids)
        if self.complete != (self.size <= self.depth):
            raise ValueError("pool.complete must say whether the pool size is at most its depth")
        if m != min(self.size, self.depth):
            raise ValueError("a pool records min(size, depth) members")
        if len(self.features) != m or len(self.paths) != m:
            raise ValueError("pool.features and pool.paths hold one entry per member")
        if self.replayable == (self.reason is not None):
            raise ValueError("a pool names a reason exactly when it is not replayable")
        if (
            len(set(self.node_ids)) != m
            or len(set(self.outside_ids)) != len(self.outside_ids)
            or set(self.node_ids) & set(self.outside_ids)
        ):
            raise ValueError("pool members and outside neighbours are distinct nodes")
        width = len(FEATURE_LAYOUT.features)
        for row in self.features:
            if len(row) != width:
                raise ValueError(f"each pool member records {width} features in the order {FEATURE_LAYOUT.features}")
            if not all(0.0 <= v <= 1.0 for v in row[_INTERACTIONS]):
                raise ValueError("interaction features lie in [0, 1]")
        _sorted_unique_in_range(self.cross_scope, m, "cross_scope")
        _sorted_unique_in_range(self.update_eligible, m, "update_eligible")
        _sorted_unique_in_range(self.outside_cross_scope, len(self.outside_ids), "outside_cross_scope")
        if self.neighbours:
            if len(self.neighbours) != m:
                raise ValueError("pool.neighbours holds one list per member, or none when session inheritance is off")
            bound = m + len(self.outside_ids)
            used: set[int] = set()
            for i, refs in enumerate(self.neighbours):
                if any(r >= bound or r == i for r in refs) or len(set(refs)) != len(refs):
                    raise ValueError(f"pool.neighbours[{i}] names a member or outside node that does not exist")
                used.update(refs)
            if any(m + j not in used for j in range(len(self.outside_ids))):
                raise ValueError("every outside node is some member's session neighbour")
        elif self.outside_ids:
            raise ValueError("outside nodes are session neighbours; this pool records none")
        return self

    @classmethod
    def unrecorded(cls, size: int, reason: PoolReason = "not_recorded") -> CandidatePool:
        """A depth-0 pool: only its size is known (synthetic receipts, recording off)."""
        return cls(
            depth=0,
            size=size,
            complete=size == 0,
            replayable=False,
            reason=reason,
            current_state=False,
            episodic=False,
            node_ids=(),
            features=(),
            paths=(),
            cross_scope=(),
            update_eligible=(),
            neighbours=(),
            outside_ids=(),
            outside_cross_scope=(),
        )

    def canonical_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)
