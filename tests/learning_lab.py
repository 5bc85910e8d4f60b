"""The learning lab (``prme_core.datasets.lab``) with what only the tests need: small gate
thresholds, a list of one-word subjects, and a write that lands in the middle of a holdout."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from prme_core import MemoryClient
from prme_core.datasets.lab import (
    LAB_OWNER,
    LAB_SCOPES,
    NOW,
    TOPICS,
    Lab,
    build_lab,
    feedback_question,
    holdout_question,
    make_lab,
)

__all__ = [
    "HOLDOUT_CONFIG",
    "LAB_OWNER",
    "LAB_SCOPES",
    "LEARNING_CONFIG",
    "NOW",
    "SUBJECTS",
    "TOPICS",
    "Lab",
    "build_lab",
    "feedback_question",
    "holdout_question",
    "make_lab",
    "store_repair_memories",
    "write_during_holdout",
]

LEARNING_CONFIG = {"min_training_queries": 10, "min_validation_queries": 5}
HOLDOUT_CONFIG = {"min_query_groups": 10}


SUBJECTS = (
    "cat",
    "dog",
    "garden",
    "piano",
    "kyoto",
    "salmon",
    "bicycle",
    "tea",
    "chess",
    "violin",
    "marathon",
    "python",
    "coffee",
    "sailing",
    "camera",
    "novel",
    "yoga",
    "pottery",
    "tennis",
    "baking",
    "lantern",
    "glacier",
    "harbor",
    "meteor",
    "canoe",
    "tulip",
    "falcon",
    "quartz",
    "saddle",
    "oboe",
)
"""Distinct one-word subjects for small hand-built corpora (holdout, full-retrieval and profile tests)."""


def store_repair_memories(client: MemoryClient, topics: Sequence[str]) -> dict[str, uuid.UUID]:
    """Store, for each topic, Alice's low-salience memory of its repair price beside a
    high-salience distractor; return each topic's repair memory (the relevant one)."""
    items = []
    for topic in topics:
        items.append(
            {
                "content": f"The {topic} repair costs forty dollars at the {topic} workshop",
                "salience": 0.05,
                "confidence": 0.1,
            }
        )
        items.append({"content": f"Alice said something about a {topic} once", "salience": 1.0, "confidence": 1.0})
    nodes = client.store_batch("alice", items)
    return {topic: nodes[2 * i].id for i, topic in enumerate(topics)}


def write_during_holdout(monkeypatch, owner: str) -> None:
    """Make the third retrieval from now on store a memory first: a write that lands in the
    middle of a holdout's paired retrievals."""
    original = MemoryClient.retrieve
    calls = []

    def retrieve_and_write(self, query, **kw):
        calls.append(query)
        if len(calls) == 3:
            self.store_memory(owner, "Alice: a memory written while the holdout ran")
        return original(self, query, **kw)

    monkeypatch.setattr(MemoryClient, "retrieve", retrieve_and_write)
