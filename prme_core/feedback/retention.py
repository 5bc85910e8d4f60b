"""Receipt retention: the scored pool of a receipt nobody gave feedback on is dropped once it is
old enough; everything else of every receipt stays.

A pool is what learning re-ranks (pool replay), and learning reads only receipts that carry
feedback, so an unlabelled receipt's pool is the one part of it nothing will read once its
feedback window has passed. The policy:

* a receipt with any relevance record, agent judgment or answer citation keeps everything;
* a receipt without one, admitted more than ``older_than`` ago, keeps its canonical JSON (its
  returned list, scores, features and checksum: it still verifies and replays exactly) and its
  projection row, and loses its stored pool; the row records when (``pool_dropped_us``);
* feedback on a receipt whose pool was dropped is refused (``InvalidInput`` on ``request_id``):
  labels must come within the window, so a labelled receipt is always whole. The check and the
  drop take the same per-owner lock, so no label can slip in between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from prme_core.errors import InvalidInput
from prme_core.feedback.citations import OP_CITATIONS
from prme_core.feedback.relevance import OP_RELEVANCE
from prme_core.receipts.store import OP_RECEIPT, retention_lock
from prme_core.storage.base import Store
from prme_core.types import to_epoch_us, utc_now
from prme_core.validation import check_owner

DEFAULT_RETENTION = timedelta(days=30)
MIN_RETENTION = timedelta(hours=1)
BATCH = 1000
FEEDBACK_OPS = (OP_RELEVANCE, OP_CITATIONS)


@dataclass
class RetentionResult:
    """What one retention pass did, per owner and in total."""

    cutoff: datetime
    compacted: dict[str, int] = field(default_factory=dict)
    bytes_dropped: dict[str, int] = field(default_factory=dict)

    @property
    def receipts(self) -> int:
        return sum(self.compacted.values())

    @property
    def bytes(self) -> int:
        return sum(self.bytes_dropped.values())


def apply_retention(
    store: Store,
    *,
    older_than: timedelta = DEFAULT_RETENTION,
    owners: list[str] | None = None,
    now: datetime | None = None,
) -> RetentionResult:
    """Drop the pools of receipts without feedback admitted before ``now - older_than`` (every
    owner's, or ``owners``'), a thousand receipts per transaction; safe to rerun and to stop."""
    if not isinstance(older_than, timedelta) or older_than < MIN_RETENTION:
        raise InvalidInput("older_than", f"must be a duration of at least {MIN_RETENTION}, got {older_than!r}")
    moment = now or utc_now()
    result = RetentionResult(cutoff=moment - older_than)
    if owners is None:
        with store.transaction(read_only=True) as tx:
            owners = tx.receipt_owners()
    for owner in [check_owner(o) for o in owners]:
        while True:
            with store.transaction() as tx:
                tx.lock(retention_lock(owner))
                ids = tx.compactable_receipts(
                    owner,
                    receipt_op=OP_RECEIPT,
                    feedback_ops=FEEDBACK_OPS,
                    before_us=to_epoch_us(result.cutoff),
                    limit=BATCH,
                )
                dropped = tx.drop_pools(owner, ids, to_epoch_us(moment)) if ids else 0
            if ids:
                result.compacted[owner] = result.compacted.get(owner, 0) + len(ids)
                result.bytes_dropped[owner] = result.bytes_dropped.get(owner, 0) + dropped
            if len(ids) < BATCH:
                break
    return result
