"""Learning targets: the (owner, exact scope set) pairs that receive relevance feedback, and a
fingerprint that changes whenever an owner's feedback grows.

An orchestrator's discovery sensor adds a target per new pair; its schedule re-learns a target
whose fingerprint moved since the last snapshot. Both read the operations log through these.
"""

from __future__ import annotations

from prme_core.feedback.relevance import OP_RELEVANCE
from prme_core.storage.base import Store


def feedback_scope_sets_since(store: Store, after_seq: int, *, limit: int) -> list[tuple[str, tuple[str, ...], int]]:
    """(owner, scope set, newest log position) of each (owner, scope set) with relevance records
    admitted after log position ``after_seq``, oldest first, at most ``limit`` of them."""
    with store.transaction(read_only=True) as tx:
        found = tx.scope_sets_since(OP_RELEVANCE, after_seq, limit)
    return [(owner, tuple(key.split("+")), newest) for owner, key, newest in found]


def feedback_fingerprint(store: Store, owner: str) -> str:
    """``<count>:<newest log position>`` of the owner's relevance records: it changes when one is
    added, so a snapshot taken at one fingerprint is current while the fingerprint holds."""
    with store.transaction(read_only=True) as tx:
        count, newest = tx.operation_fingerprint(owner, OP_RELEVANCE)
    return f"{count}:{newest}"
