"""BM25 parameters of the lexical channel: an engine setting, recorded in every receipt.

The defaults (k1 0.9, b 0.2; before: 1.5, 0.75) were chosen on the LoCoMo development file's
feedback questions by ``benchmarks/locomo_tuning.py`` (grid, rule and holdout check in
``benchmarks/results/tuning/``): short conversational turns want little length normalization.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from prme_core.types import FrozenModel

BM25_K1_MAX = 5.0


class Bm25Parameters(FrozenModel):
    """Term saturation ``k1`` in [0, 5] and length normalization ``b`` in [0, 1] (bm25s, Lucene
    variant), the same for every owner of an engine."""

    k1: Annotated[float, Field(ge=0.0, le=BM25_K1_MAX)] = 0.9
    b: Annotated[float, Field(ge=0.0, le=1.0)] = 0.2
    method: Literal["lucene"] = "lucene"

    def as_parameters(self) -> dict[str, Any]:
        """The keyword arguments of ``bm25s.BM25``, as receipts record them."""
        return {"k1": self.k1, "b": self.b, "method": self.method}
