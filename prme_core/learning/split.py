"""Query groups and the train/validation split.

A group is a user intent: by default the normalized query (Unicode NFKC, casefold, whitespace
collapsed); callers may merge known paraphrases under an explicit group name. A group's id is
the SHA-256 of the canonical JSON ``["query", normalized]`` or ``["explicit", name]``.

A fixed hash assigns each group to training or validation: validation iff
``int(sha256(f"{seed}:{group_id}"), 16) / 2**256 < validation_fraction``. The assignment depends
on nothing but the group and the seed, so adding feedback can never move an existing group.
"""

from __future__ import annotations

import hashlib

from prme_core.canonical import canonical_json, sha256_hex
from prme_core.retrieval.text import normalize_query

SPLIT_ALGORITHM = "sha256-seeded-group-hash-v1"


def group_id(normalized_query: str, explicit_group: str | None = None) -> str:
    key = ["explicit", explicit_group] if explicit_group is not None else ["query", normalized_query]
    return sha256_hex(canonical_json(key))


def query_digest(query: str) -> str:
    """SHA-256 of a query's normalized form (lets reports name queries without their text)."""
    return sha256_hex(normalize_query(query))


def is_validation(group: str, *, seed: int, validation_fraction: float) -> bool:
    value = int(hashlib.sha256(f"{seed}:{group}".encode()).hexdigest(), 16)
    return value / float(2**256) < validation_fraction
