"""Answer citation records: which included memories an answer generated from a saved retrieval
cited. A record binds the answer id, an optional answer digest, the collection method, the
receipt checksum and the rendered-context checksum. Current graph state is never consulted, so
a citation stays auditable after the cited node changes or is archived. An empty citation set
is a valid "reported no citations" record; citations are not relevance labels.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

from pydantic import Field

from prme_core.errors import InvalidInput
from prme_core.feedback.records import FeedbackRecordKind, feedback_receipt
from prme_core.receipts.projection import scope_key
from prme_core.storage.base import Store
from prme_core.types import FrozenModel, Label, Owner, Sha256Hex, Unique, UtcDatetime, utc_now
from prme_core.validation import check_owner, parse_model

OP_CITATIONS = "answer_citations"
MAX_CITED = 1000
CitationMethod = Literal["model_reported", "application_verified", "human_verified"]


class AnswerCitationSubmission(FrozenModel):
    citation_id: UUID
    request_id: UUID
    answer_id: Label
    cited_node_ids: Annotated[tuple[UUID, ...], Field(max_length=MAX_CITED), Unique] = ()
    answer_digest: Sha256Hex | None = None
    method: CitationMethod


class AnswerCitationRecord(AnswerCitationSubmission):
    schema_version: Literal[1] = 1
    owner: Owner
    recorded_at: UtcDatetime
    receipt_checksum: Sha256Hex
    context_sha256: Sha256Hex

    def matches(self, other: AnswerCitationRecord) -> bool:
        return self.model_dump(exclude={"recorded_at"}) == other.model_dump(exclude={"recorded_at"})


CITATIONS = FeedbackRecordKind(
    AnswerCitationRecord, "answer-citations", OP_CITATIONS, "citation_id", AnswerCitationRecord.matches
)


def record_answer_citations(
    store: Store,
    request_id: Any,
    *,
    owner: Any,
    answer_id: Any,
    cited_node_ids: Any,
    method: Any,
    answer_digest: Any = None,
    citation_id: Any = None,
) -> AnswerCitationRecord:
    """Validate and append one citation record; an exact retry returns the first record."""
    owner = check_owner(owner)
    if isinstance(cited_node_ids, (str, bytes)):
        raise InvalidInput("cited_node_ids", "must be a list of node ids (possibly empty)")
    submission = parse_model(
        AnswerCitationSubmission,
        {
            "citation_id": uuid4() if citation_id is None else citation_id,
            "request_id": request_id,
            "answer_id": answer_id,
            "cited_node_ids": tuple(cited_node_ids or ()),
            "answer_digest": answer_digest,
            "method": method,
        },
        "",
    )
    with store.transaction() as tx:  # the receipt checks and the append commit together
        receipt, checksum = feedback_receipt(tx, store, owner, submission.request_id)
        for node_id in submission.cited_node_ids:
            cand = receipt.candidate(node_id)
            if cand is None or not (cand.in_context and cand.has_content):
                raise InvalidInput(
                    "cited_node_ids",
                    f"{node_id} is not a content-bearing entry of that retrieval's "
                    "context; cite only memories whose content the answer was shown",
                )
        record = AnswerCitationRecord(
            **submission.model_dump(),
            owner=owner,
            recorded_at=utc_now(),
            receipt_checksum=checksum,
            context_sha256=receipt.context_sha256,
        )
        return CITATIONS.append(
            store,
            record,
            scope_key=scope_key(receipt.scopes),
            conflict=f"citation_id {submission.citation_id} already identifies a different answer "
            "citation record; the first record stands",
        )


def get_answer_citations(store: Store, citation_id: UUID, owner: str) -> AnswerCitationRecord | None:
    return CITATIONS.get(store, citation_id, owner)


def list_answer_citations(
    store: Store, owner: str, *, after: UUID | None = None, limit: int = 100
) -> list[AnswerCitationRecord]:
    return CITATIONS.page(store, owner, after=after, limit=limit)
