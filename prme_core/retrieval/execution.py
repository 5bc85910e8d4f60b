"""The execution feature identity recorded in every receipt (observed at pipeline creation).

It lists the Python and package versions, the SHA-256 of every source file that shapes scores,
order or context, and the embedding, lexical, tokenizer and storage identities. These are
observations, not model-weight digests; a profile applies only where they match exactly.
"""

from __future__ import annotations

import hashlib
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from prme_core.canonical import canonical_digest
from prme_core.features import TRACE_FIELDS

_SOURCES = (
    "formula",
    "multipliers",
    "scoring",
    "query_analysis",
    "candidates",
    "corpus",
    "session_context",
    "ranked",
    "ranking",
    "interaction",
    "reranker",
    "packing",
    "rendering",
    "text",
    "embedding",
    "tokenizer",
    "pipeline",
)
_PACKAGES = ("prme-learning", "numpy", "bm25s", "pydantic", "orjson")
_BACKEND_PACKAGES = {"duckdb": "duckdb", "postgresql": "psycopg"}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not-installed"


def source_hashes() -> dict[str, str]:
    here = Path(__file__).resolve().parent
    return {name: hashlib.sha256((here / f"{name}.py").read_bytes()).hexdigest() for name in _SOURCES}


def execution_features(
    *, backend: str, storage_class: str, embedding: dict[str, Any], lexical: dict[str, Any], tokenizer: dict[str, Any]
) -> dict[str, Any]:
    packages = {p: _version(p) for p in _PACKAGES}
    driver = _BACKEND_PACKAGES.get(backend)
    if driver:
        packages[driver] = _version(driver)
    return {
        "python": platform.python_version(),
        "trace_layout": list(TRACE_FIELDS),  # the scorer's features: a profile fitted on others never applies
        "packages": packages,
        "source_sha256": source_hashes(),
        "embedding": embedding,
        "lexical": lexical,
        "tokenizer": tokenizer,
        "storage": {"backend": backend, "implementation": storage_class},
    }


def feature_identity_sha256(features: dict[str, Any]) -> str:
    """One digest of a receipt's feature identity (what profiles compare against)."""
    return canonical_digest(features)
