"""A ranked candidate while the pipeline works on it, and the ordering helpers.

A candidate's score is always recomputed from its base score and its ordered operations with
``formula.apply_adjustments`` — never assigned directly — so replay reproduces it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prme_core.retrieval.formula import SortPolicy, apply_adjustment, sort_key


@dataclass(frozen=True)
class Op:
    """A recorded post-score operation (see ``receipts.model.ScoreAdjustment``)."""

    kind: str
    coefficient: float
    neural_score: float | None = None
    source_row: int | None = None


@dataclass
class Ranked:
    row: int  # corpus row of this candidate
    source: int  # pool position whose features produced the base score (itself unless inherited)
    base: float
    ops: tuple[Op, ...] = ()
    paths: set[str] = field(default_factory=set)
    reranker_score: float | None = None
    cross_scope: bool = False
    node_key: int = 0  # the node UUID as an integer: orders exactly like its canonical string
    path_score: float = 0.0
    score: float = field(init=False)

    def __post_init__(self) -> None:
        s = float(self.base)
        for op in self.ops:
            s = apply_adjustment(s, op.kind, op.coefficient, op.neural_score)
        self.score = s

    def with_op(self, op: Op) -> None:
        """Append an operation and apply it to the score."""
        self.ops = (*self.ops, op)
        self.score = apply_adjustment(self.score, op.kind, op.coefficient, op.neural_score)

    def inherit(self, row: int, op: Op, node_key: int, path: str, cross_scope: bool) -> Ranked:
        """A copy of this candidate's provenance for another node, with one more operation."""
        return Ranked(
            row=row,
            source=self.source,
            base=self.base,
            ops=(*self.ops, op),
            paths={path},
            cross_scope=cross_scope,
            node_key=node_key,
            path_score=self.path_score,
        )


def ordered(items: list[Ranked], policy: SortPolicy) -> list[Ranked]:
    return sorted(
        items, key=lambda r: sort_key(policy, r.score, r.path_score, r.node_key, r.reranker_score is not None)
    )
