"""An agent's judgment of a retrieval it answered from: the results it used are relevant, the
results it was shown and did not use are not. One call after answering records it as one
explicit relevance record (method ``agent_judgment``) that learning can use, and says plainly
when it cannot (nothing used, everything used, a retrieval learning does not read).

The record's id derives from the retrieval, so an agent's retry lands on the same record, and a
second, different judgment of the same retrieval is refused (the first stands).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import Field

from prme_core.canonical import canonical_json
from prme_core.errors import InvalidInput, ReceiptNotFound
from prme_core.feedback.relevance import RelevanceRecord, record_relevance
from prme_core.memory.bank import parse_uuid
from prme_core.receipts.model import PROVENANCE_SINCE, RetrievalReceipt
from prme_core.receipts.store import get_receipt
from prme_core.storage.base import Store
from prme_core.types import FrozenModel
from prme_core.validation import check_owner

METHOD = "agent_judgment"
MAX_USED = 200


class AgentJudgment(FrozenModel):
    """The stored record, and whether ranking can learn from it (and if not, why)."""

    record: RelevanceRecord
    relevant: int = Field(ge=0)
    not_relevant: int = Field(ge=0)
    usable_for_learning: bool
    reason: str


def judgment_id(owner: str, request_id: UUID) -> UUID:
    """One agent judgment per retrieval: the feedback id derived from (owner, request id)."""
    return uuid5(NAMESPACE_URL, canonical_json(["prme:agent-judgment:v1", owner, str(request_id)]).decode())


def usability(receipt: RetrievalReceipt, relevant: int, not_relevant: int) -> tuple[bool, str]:
    """Whether learning can use a judgment of this retrieval with these label counts, and why."""
    if receipt.schema_version < PROVENANCE_SINCE:
        return False, "this retrieval's receipt records no score provenance, which learning needs"
    if receipt.scoring.fusion != "weighted":
        return False, "this retrieval ranked by rank fusion (fusion='rrf'), which profiles do not adjust"
    if relevant == 0:
        return False, (
            "no shown result was used: learning compares a relevant result with one that was not; judge a "
            "retrieval whose results helped the answer"
        )
    if not_relevant == 0:
        return False, (
            "every shown result was used: learning compares a relevant result with one that was not; nothing "
            "here says which results should have ranked lower"
        )
    return True, f"{relevant} used and {not_relevant} shown but unused: both kinds, so ranking can learn from it"


def record_agent_judgment(store: Store, request_id: Any, used: Sequence[Any], *, owner: Any) -> AgentJudgment:
    """Record that ``used`` (node ids among the retrieval's returned results) helped the answer
    and every other returned result did not."""
    owner = check_owner(owner)
    request = parse_uuid(request_id, "request_id")
    if isinstance(used, (str, bytes)) or not isinstance(used, Sequence):
        raise InvalidInput("used", "must be a list of the node ids the answer used (empty: none helped)")
    if len(used) > MAX_USED:
        raise InvalidInput("used", f"names {len(used)} node ids; at most {MAX_USED}")
    used_ids = {parse_uuid(n, f"used[{i}]") for i, n in enumerate(used)}
    found = get_receipt(store, owner, request)
    if found is None:
        raise ReceiptNotFound(f"request {request} has no saved receipt for this owner; judge a retrieval you ran")
    receipt, _ = found
    shown = [c.node_id for c in receipt.candidates]
    unknown = sorted(str(n) for n in used_ids - set(shown))
    if unknown:
        raise InvalidInput("used", f"{unknown[0]} was not among the results this retrieval returned")
    labels = {node: node in used_ids for node in shown}
    if not labels:
        raise InvalidInput("request_id", "this retrieval returned no results; there is nothing to judge")
    record = record_relevance(
        store,
        request,
        labels,
        owner=owner,
        surface="results",
        method=METHOD,
        feedback_id=judgment_id(owner, request),
    )
    relevant = sum(record.labels.values())
    usable, reason = usability(receipt, relevant, len(record.labels) - relevant)
    return AgentJudgment(
        record=record,
        relevant=relevant,
        not_relevant=len(record.labels) - relevant,
        usable_for_learning=usable,
        reason=reason,
    )
