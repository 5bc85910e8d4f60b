"""Embedding providers and the cosine arithmetic of the semantic channel.

The default provider, ``HashedEmbedding``, needs no model download: it hashes token, bigram and
character-trigram features into signed integer counts. Because its vectors hold small integers,
every float32 dot product of two of them is an exact integer (as long as the sum of |products|
stays below 2**24, which ``cosine_scores`` checks), so the result does not depend on the order in
which BLAS sums the products: semantic scores, and hence rankings, are bit-identical across runs,
machines, thread counts and row orders.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from prme_core.errors import InvalidInput
from prme_core.retrieval.text import lexical_tokens

MIN_DIMENSION = 16
MAX_DIMENSION = 4096
DEFAULT_DIMENSION = 384
TOKEN_WEIGHT = 2
_EXACT_FLOAT32 = float(2**24)
"""Integers up to 2**24 are exact in float32; beyond that a dot product may round."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    """What retrieval needs from an embedding model."""

    @property
    def dimension(self) -> int: ...

    def identity(self) -> dict[str, str | int]:
        """``provider``, ``model``, ``version`` and ``dimension``: recorded in every receipt."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dimension)."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """float32 array of shape (dimension,)."""
        ...


class HashedEmbedding:
    """Deterministic feature-hashing embedding: signed integer counts stored as float32.

    Features of a text: each lexical token (weight 2), each adjacent token bigram (weight 1) and
    each character trigram of each token padded as ``<token>`` (weight 1). A feature's 64-bit
    BLAKE2b hash picks its index (hash mod dimension) and its sign (the top bit).
    """

    __slots__ = ("_dimension",)

    def __init__(self, dimension: int = DEFAULT_DIMENSION) -> None:
        if (
            isinstance(dimension, bool)
            or not isinstance(dimension, int)
            or not MIN_DIMENSION <= dimension <= MAX_DIMENSION
        ):
            raise InvalidInput(
                "dimension", f"must be an integer in [{MIN_DIMENSION}, {MAX_DIMENSION}]; got {dimension!r}"
            )
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    def identity(self) -> dict[str, str | int]:
        return {"provider": "prme.hashed", "model": "hashed-ngrams", "version": "1", "dimension": self._dimension}

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        items = [] if isinstance(texts, str) else list(texts)
        if isinstance(texts, str) or not all(isinstance(t, str) for t in items):
            raise InvalidInput("texts", "must be a sequence of strings (wrap a single text in a list)")
        token_cache: dict[str, tuple[list[int], list[int]]] = {}
        bigram_cache: dict[str, tuple[int, int]] = {}
        cols: list[int] = []
        vals: list[int] = []
        counts: list[int] = []
        for text in items:
            start = len(cols)
            tokens = lexical_tokens(text)
            for token in tokens:
                features = token_cache.get(token)
                if features is None:
                    features = token_cache[token] = self._token_features(token)
                cols += features[0]
                vals += features[1]
            for bigram in map(" ".join, zip(tokens, tokens[1:])):
                feature = bigram_cache.get(bigram)
                if feature is None:
                    feature = bigram_cache[bigram] = self._feature("b:" + bigram, 1)
                cols.append(feature[0])
                vals.append(feature[1])
            counts.append(len(cols) - start)
        matrix = np.zeros((len(counts), self._dimension), dtype=np.float32)
        rows = np.repeat(np.arange(len(counts), dtype=np.intp), counts)
        np.add.at(matrix, (rows, np.asarray(cols, dtype=np.intp)), np.asarray(vals, dtype=np.float32))
        return matrix

    def embed_query(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise InvalidInput("text", f"must be a string; got {type(text).__name__}")
        return self.embed_documents([text])[0]

    def _feature(self, feature: str, weight: int) -> tuple[int, int]:
        digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
        return digest % self._dimension, -weight if digest >> 63 else weight

    def _token_features(self, token: str) -> tuple[list[int], list[int]]:
        padded = f"<{token}>"
        features = [self._feature("u:" + token, TOKEN_WEIGHT)]
        features += [self._feature("c:" + padded[i : i + 3], 1) for i in range(len(padded) - 2)]
        return [c for c, _ in features], [v for _, v in features]


def row_norms(matrix: np.ndarray) -> np.ndarray:
    """Euclidean norm of each row: sqrt of the float64 sum of squares."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2:
        raise InvalidInput("matrix", f"must be 2-dimensional; got shape {m.shape}")
    return np.sqrt((m * m).sum(axis=1))


def cosine_scores(matrix: np.ndarray, norms: np.ndarray, query: np.ndarray, query_norm: float) -> np.ndarray:
    """Cosine of each row with the query (float64, clipped to [-1, 1]; 0 where a norm is 0).

    Dot products are ``matrix @ query`` in float32, exact for integer-valued vectors; if the
    Cauchy-Schwarz bound says a dot product could exceed 2**24, they are taken in float64
    instead, which keeps integer sums exact up to 2**53.
    """
    m = np.asarray(matrix, dtype=np.float32)
    q = np.asarray(query, dtype=np.float32)
    n = np.asarray(norms, dtype=np.float64)
    if m.ndim != 2 or q.shape != (m.shape[1],) or n.shape != (m.shape[0],):
        raise InvalidInput(
            "matrix",
            f"shapes disagree: matrix {m.shape}, norms {n.shape}, query {q.shape}; expected (n, d), (n,) and (d,)",
        )
    if not np.isfinite(query_norm) or query_norm < 0:
        raise InvalidInput("query_norm", f"must be finite and >= 0; got {query_norm!r}")
    if n.size and float(n.max()) * query_norm >= _EXACT_FLOAT32:
        dots = m.astype(np.float64) @ q.astype(np.float64)
    else:
        dots = (m @ q).astype(np.float64)
    denominator = n * float(query_norm)
    positive = denominator > 0.0
    scores = np.zeros(m.shape[0], dtype=np.float64)
    np.divide(dots, denominator, out=scores, where=positive)
    return np.clip(scores, -1.0, 1.0)


EMBEDDING_PROVIDERS = ("hashed", "minilm")
"""Names an engine or Dagster resource can select: the dependency-free default, or the local
all-MiniLM-L6-v2 model of the optional ``semantic`` extra."""
_PROVIDERS: dict[str, EmbeddingProvider] = {}


def embedding_provider(name: str) -> EmbeddingProvider:
    """The provider called ``name``, one instance per process (a model loads once and every step
    of a run shares it). ``minilm`` raises ``SentenceEmbeddingUnavailable`` with an install hint
    where the extra is missing; nothing falls back silently."""
    if name not in EMBEDDING_PROVIDERS:
        raise InvalidInput("embedding", f"must be one of {', '.join(EMBEDDING_PROVIDERS)}; got {name!r}")
    if name not in _PROVIDERS:
        if name == "minilm":
            from prme_core.retrieval.sentence_embedding import SentenceTransformerEmbedding

            # The weights are local files; keep the Hugging Face stack from asking the network.
            for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"):
                os.environ.setdefault(variable, "1")

            _PROVIDERS[name] = SentenceTransformerEmbedding()
        else:
            _PROVIDERS[name] = HashedEmbedding()
    return _PROVIDERS[name]
