"""Optional reranking stage behind a protocol (none by default).

A reranker scores the top ``top_k`` candidates; each gets a recorded ``neural_blend``
operation s' = (1 − prior)·neural + prior·s, the prefix is re-sorted by (−score, id) and the
base-ranked tail keeps its order ("reranked_prefix" sort policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from prme_core.retrieval.text import lexical_tokens


class Reranker(Protocol):
    """Scores (query, text) pairs in [0, 1]; its identity is recorded in every receipt."""

    def identity(self) -> dict[str, str]: ...
    def score(self, query: str, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class RerankerSettings:
    top_k: int = 50
    prior_weight: float = 0.3

    def __post_init__(self) -> None:
        if not 1 <= self.top_k <= 1000:
            raise ValueError("reranker top_k must be in 1..1000")
        if not 0.0 <= self.prior_weight <= 1.0:
            raise ValueError("reranker prior_weight must be in [0, 1]")


class TokenOverlapReranker:
    """A dependency-free deterministic reranker: the share of query tokens a text contains."""

    def identity(self) -> dict[str, str]:
        return {"provider": "prme.overlap", "model": "token-overlap", "version": "1"}

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        wanted = set(lexical_tokens(query))
        if not wanted:
            return np.zeros(len(texts))
        return np.array([len(wanted & set(lexical_tokens(t))) / len(wanted) for t in texts], dtype=np.float64)


def reranker_identity(reranker: Reranker | None) -> dict[str, object]:
    if reranker is None:
        return {"enabled": False}
    return {"enabled": True, **reranker.identity()}
