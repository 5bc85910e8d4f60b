"""Reports the store itself produced: every offline proposal and holdout evaluation computed
through the store (``MemoryClient.evaluate_learning``, ``evaluate_holdout``,
``evaluate_full_retrieval``, the learning pipeline's stages) is kept as an append-only
``learning_report`` operation, keyed by the SHA-256 of its canonical bytes.

A ranking profile is made only from reports the store holds byte for byte: a report a caller
edited — multipliers changed and checksums recomputed so that it still loads — has other bytes,
so no record, and is refused. The same rule holds for Python, HTTP and MCP.
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, uuid5

from pydantic import BaseModel

from prme_core.canonical import canonical_json, sha256_hex
from prme_core.receipts.projection import scope_key
from prme_core.storage.base import Store
from prme_core.storage.records import OperationDraft, StoredOperation

OP_REPORT = "learning_report"


def report_id(owner: str, report: BaseModel) -> str:
    """The record id of a report: (owner, kind, SHA-256 of its canonical bytes)."""
    digest = sha256_hex(report.canonical_bytes())  # type: ignore[attr-defined]
    return str(
        uuid5(NAMESPACE_URL, canonical_json(["prme:learning-report:v1", owner, type(report).__name__, digest]).decode())
    )


def record_report(store: Store, report: BaseModel) -> str:
    """Keep ``report`` (an evaluation this store just produced) as evidence; an exact repeat is
    the same record. Returns the record id."""
    owner: str = report.owner  # type: ignore[attr-defined]
    rid = report_id(owner, report)
    draft = OperationDraft(
        id=rid,
        owner=owner,
        op_type=OP_REPORT,
        payload=report.canonical_bytes(),  # type: ignore[attr-defined]
        scope_key=scope_key(tuple(report.scopes)),  # type: ignore[attr-defined]
        target_id=type(report).__name__,
    )
    with store.transaction() as tx:
        tx.append_operation(draft)
    return rid


def recorded_operation(tx: Any, report: BaseModel) -> StoredOperation | None:
    """The record holding exactly these bytes as a report of its owner, within ``tx``; None if none."""
    owner: str = report.owner  # type: ignore[attr-defined]
    op = tx.get_operation(owner, report_id(owner, report))
    exact = op is not None and op.op_type == OP_REPORT and op.payload == report.canonical_bytes().decode()  # type: ignore[attr-defined]
    return op if exact else None


def is_recorded(store: Store, report: BaseModel) -> bool:
    """Whether the store holds exactly these bytes as a report of its owner."""
    with store.transaction(read_only=True) as tx:
        return recorded_operation(tx, report) is not None
