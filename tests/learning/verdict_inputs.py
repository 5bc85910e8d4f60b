"""What the gate-verdict tests judge: a synthetic snapshot with a planted signal, and holdout
runs refused the way the store refuses them."""

import hashlib
import random

from prme_core.errors import HoldoutOverlapsTraining, HoldoutQueryNotFound, MemoryChangedDuringHoldout
from prme_core.learning.snapshot import FeedbackSnapshot, snapshot_from_receipts
from prme_core.learning.synthetic import synthetic_receipt, synthetic_record
from prme_core.receipts.store import receipt_bytes
from prme_core.retrieval.multipliers import UNITY


def planted_snapshot(owner: str) -> FeedbackSnapshot:
    """160 query groups (over 20 of them validation groups at the default 15% share), one judged
    synthetic receipt each, relevance planted on the lexical feature."""
    rng = random.Random(1)
    items = [synthetic_receipt(rng, owner=owner, query=f"question {g}") for g in range(160)]
    receipts = [(r, hashlib.sha256(receipt_bytes(r)).hexdigest()) for r, _ in items]
    return snapshot_from_receipts(owner, receipts, [synthetic_record(rng, r, rel) for r, rel in items])


class RefusingClient:
    """A client whose holdout run raises ``error`` (what the store raises for that situation)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def holdout_baseline(self, owner, scopes):
        return None, UNITY

    def run_holdout(self, *args, **kwargs):
        raise self.error


REFUSALS = [
    (MemoryChangedDuringHoldout("memory changed", before="a" * 64, after="b" * 64), "memory_changed"),
    (HoldoutQueryNotFound("no active holdout queries"), "no_holdout_queries"),
    (HoldoutOverlapsTraining("2 of 60 active holdout queries are training queries"), "query_overlap"),
]
"""Each error a holdout run can be refused with, and the holdout stage status it maps to."""
