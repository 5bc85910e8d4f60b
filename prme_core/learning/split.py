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
from collections.abc import Sequence

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


def crossfit_fold(group: str, *, seed: int, folds: int) -> int:
    """The fold (0..folds-1) of a training group: a fixed hash of the group and the seed, so a
    group stays in its fold however much feedback arrives."""
    return int(hashlib.sha256(f"{seed}:crossfit:{group}".encode()).hexdigest(), 16) % folds


def group_sample(request_ids: Sequence[str], *, limit: int, seed: int) -> list[int]:
    """At most ``limit`` of one group's requests (indices, ascending): the first in the order of
    a seeded hash of the request id."""
    if len(request_ids) <= limit:
        return list(range(len(request_ids)))
    ranked = sorted(range(len(request_ids)), key=lambda i: _sample_key(seed, request_ids[i]))
    return sorted(ranked[:limit])


def _sample_key(seed: int, request_id: str) -> bytes:
    return hashlib.sha256(f"{seed}:{request_id}".encode()).digest()


def fit_sample(request_ids: Sequence[str], groups: Sequence[int], *, limit: int, seed: int) -> list[int]:
    """At most ``limit`` of the training requests (indices), spread over their groups: each
    group's requests in the order of a seeded hash of the request id, then round robin over
    groups in group order, so every group keeps at least one request while the limit allows."""
    if len(request_ids) <= limit:
        return list(range(len(request_ids)))
    by_group: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    queues = [
        sorted(members, key=lambda i: _sample_key(seed, request_ids[i])) for _, members in sorted(by_group.items())
    ]
    chosen: list[int] = []
    depth = 0
    while len(chosen) < limit:
        added = False
        for queue in queues:
            if depth < len(queue) and len(chosen) < limit:
                chosen.append(queue[depth])
                added = True
        if not added:
            break
        depth += 1
    return sorted(chosen)
