"""What the caller-keyed feedback records (relevance, answer citations) share: each kind's model,
operation type and key field bound once to the keyed-record store calls
(``storage.keyed_records``), and the saved receipt a feedback write is bound to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

from prme_core.errors import ReceiptNotFound
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.store import get_receipt, refuse_if_dropped
from prme_core.storage.base import Store
from prme_core.storage.keyed_records import append_record, list_records, read_record
from prme_core.storage.session import StoreSession
from prme_core.types import FrozenModel
from prme_core.validation import check_limit, check_owner

R = TypeVar("R", bound=FrozenModel)


def feedback_receipt(
    tx: StoreSession, store: Store, owner: str, request_id: UUID, *, hint: str = ""
) -> tuple[RetrievalReceipt, str]:
    """Inside a feedback write: the owner's saved receipt of ``request_id`` and its checksum.
    ``ReceiptNotFound`` (``hint`` says what to do) when there is none; ``InvalidInput`` when
    retention dropped its pool."""
    found = get_receipt(store, owner, request_id)
    if found is None:
        raise ReceiptNotFound(
            f"request {request_id} has no saved receipt for this owner" + (f"; {hint}" if hint else "")
        )
    refuse_if_dropped(tx, owner, str(request_id))
    return found


@dataclass(frozen=True)
class FeedbackRecordKind(Generic[R]):
    model: type[R]
    kind: str
    """Names the record in its operation id (``keyed_records.record_operation_id``)."""
    op_type: str
    key_field: str
    """The record's caller UUID: the key a retry repeats."""
    same: Callable[[R, R], bool]
    """Whether a retry's record is the first one again (admission time aside)."""

    def append(self, store: Store, record: R, *, scope_key: str, conflict: str) -> R:
        """Append ``record``; an exact retry (``same``) returns the first, another
        record under the same key raises ``IdempotencyConflict`` with ``conflict``."""
        return append_record(
            store,
            kind=self.kind,
            op_type=self.op_type,
            record=record,
            key_field=self.key_field,
            scope_key=scope_key,
            same=self.same,
            conflict=conflict,
        )

    def get(self, store: Store, key: UUID, owner: str) -> R | None:
        """The owner's record under ``key``, verified; None when there is none."""
        return read_record(
            store,
            self.model,
            kind=self.kind,
            op_type=self.op_type,
            owner=check_owner(owner),
            key=key,
            key_field=self.key_field,
        )

    def page(self, store: Store, owner: str, *, after: UUID | None, limit: int) -> list[R]:
        """A page of the owner's records ordered by key (1..1000 per page)."""
        return list_records(
            store,
            self.model,
            op_type=self.op_type,
            owner=check_owner(owner),
            after=after,
            limit=check_limit(limit),
            key_field=self.key_field,
        )
