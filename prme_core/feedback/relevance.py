"""Explicit relevance records: boolean labels on members of a saved retrieval.

``surface="results"`` judges returned candidates; ``surface="context"`` judges entries actually
included in the rendered context, and a positive context label needs a content-bearing entry
(a reference-only entry can only be labelled irrelevant). Labels are judgments, not verified
facts: they change no memory and no weight, and an unlabelled candidate is never a negative.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

from pydantic import Field, StrictBool, field_validator

from prme_core.errors import InvalidInput
from prme_core.feedback.records import FeedbackRecordKind, feedback_receipt
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.projection import scope_key
from prme_core.storage.base import Store
from prme_core.types import FrozenModel, Owner, Sha256Hex, UtcDatetime, utc_now
from prme_core.validation import check_owner, parse_model

OP_RELEVANCE = "relevance_record"
MAX_LABELS = 1000
Surface = Literal["results", "context"]
RelevanceMethod = Literal["explicit_user", "structured_evaluation", "agent_judgment"]
"""How the labels were given: a person's explicit judgment, a structured evaluation, or an agent's
judgment of results it was shown (used: relevant; shown but unused: not relevant)."""


class RelevanceSubmission(FrozenModel):
    """What a caller submits: labels for members of one saved retrieval."""

    feedback_id: UUID
    request_id: UUID
    labels: Annotated[dict[UUID, StrictBool], Field(min_length=1, max_length=MAX_LABELS)]
    surface: Surface
    method: RelevanceMethod


class RelevanceRecord(RelevanceSubmission):
    """A stored relevance judgment, bound to the receipt checksum it was validated against."""

    schema_version: Literal[1] = 1
    owner: Owner
    recorded_at: UtcDatetime
    receipt_checksum: Sha256Hex
    scope_key: str

    def matches(self, other: RelevanceSubmission) -> bool:
        """Same judgment: request, labels, surface and method (and for records, the receipt)."""
        same = (
            self.request_id == other.request_id
            and self.labels == other.labels
            and self.surface == other.surface
            and self.method == other.method
        )
        if isinstance(other, RelevanceRecord):
            same = same and other.receipt_checksum == self.receipt_checksum
        return same

    @field_validator("scope_key")
    @classmethod
    def _scope_key(cls, value: str) -> str:
        if not value:
            raise ValueError("scope_key must name the receipt's scope set")
        return value


RELEVANCE = FeedbackRecordKind(RelevanceRecord, "relevance", OP_RELEVANCE, "feedback_id", RelevanceRecord.matches)


def check_labels(receipt: RetrievalReceipt, labels: Mapping[UUID, bool], surface: str) -> None:
    """Every label must name a member of the saved response allowed on that surface."""
    for node_id, positive in labels.items():
        cand = receipt.candidate(node_id)
        if cand is None:
            raise InvalidInput(
                "labels",
                f"{node_id} is not a returned candidate of request {receipt.request_id}; "
                "label only members of the saved response",
            )
        if surface == "context":
            if not cand.in_context:
                raise InvalidInput(
                    "labels",
                    f"{node_id} was not included in the context; context labels need "
                    "included entries (use surface='results' for returned candidates)",
                )
            if positive and not cand.has_content:
                raise InvalidInput(
                    "labels",
                    f"{node_id} was included by reference only; a reference-only entry "
                    "cannot receive positive content credit (label it false, or use surface='results')",
                )


def record_relevance(
    store: Store, request_id: Any, labels: Any, *, owner: Any, surface: Any, method: Any, feedback_id: Any = None
) -> RelevanceRecord:
    """Validate and append one relevance record; an exact retry returns the first record."""
    owner = check_owner(owner)
    if not isinstance(labels, Mapping):
        raise InvalidInput("labels", "must be a non-empty mapping of node id to true/false")
    submission = parse_model(
        RelevanceSubmission,
        {
            "feedback_id": uuid4() if feedback_id is None else feedback_id,
            "request_id": request_id,
            "labels": dict(labels),
            "surface": surface,
            "method": method,
        },
        "",
    )
    with store.transaction() as tx:  # the receipt checks and the append commit together
        receipt, checksum = feedback_receipt(
            tx,
            store,
            owner,
            submission.request_id,
            hint="record feedback only on retrievals whose metadata.receipt_persisted is true",
        )
        check_labels(receipt, submission.labels, submission.surface)
        record = RelevanceRecord(
            **submission.model_dump(),
            owner=owner,
            recorded_at=utc_now(),
            receipt_checksum=checksum,
            scope_key=scope_key(receipt.scopes),
        )
        return append_relevance(store, record)


def append_relevance(store: Store, record: RelevanceRecord) -> RelevanceRecord:
    """Append a checked relevance record; an exact retry returns the first, another judgment
    under the same feedback id conflicts."""
    return RELEVANCE.append(
        store,
        record,
        scope_key=record.scope_key,
        conflict=f"feedback_id {record.feedback_id} already identifies a different relevance "
        "judgment; the first record stands: use a new feedback_id for a new judgment",
    )


def get_relevance(store: Store, feedback_id: UUID, owner: str) -> RelevanceRecord | None:
    return RELEVANCE.get(store, feedback_id, owner)


def list_relevance(store: Store, owner: str, *, after: UUID | None = None, limit: int = 100) -> list[RelevanceRecord]:
    """A page of the owner's relevance records ordered by feedback id (1..1000 per page)."""
    return RELEVANCE.page(store, owner, after=after, limit=limit)
