"""LoCoMo conversational memory data (Maharana et al., ACL 2024; CC BY-NC 4.0).

One conversation is one owner, one session a ``session_id``, one turn a memory node dated by
its session clock. Session clocks carry no timezone in the data; they are read as UTC.
A question's evidence ids name its complete relevant set; ids that do not resolve to a turn are
reported, never guessed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from prme_core.canonical import parse_json
from prme_core.errors import CanonicalFormError, InvalidInput
from prme_core.learning.split import query_digest
from prme_core.memory.models import MemoryInput, NodeType

LOCOMO_PATH_ENV = "PRME_LOCOMO_PATH"
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")


class LocomoDataNotFound(InvalidInput):
    """No LoCoMo file where one was looked for; the message names every path tried and how to
    point at the file."""

    def __init__(self, tried: Iterable[Path]) -> None:
        self.tried = tuple(tried)
        where = f"at {', '.join(str(p) for p in self.tried)}" if self.tried else f"given and {LOCOMO_PATH_ENV} is unset"
        super().__init__(
            "data",
            f"no LoCoMo-format JSON file {where}; pass the file's path "
            f"(prme main --data PATH) or set {LOCOMO_PATH_ENV}",
        )


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    session: int
    position: int
    time: datetime


@dataclass(frozen=True)
class Question:
    index: int
    question: str
    answer: str | None
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    _by_dia: dict[str, Turn] = field(default_factory=dict, repr=False, compare=False)

    def turn(self, dia_id: str) -> Turn | None:
        return self._by_dia.get(dia_id)

    def node_id(self, dia_id: str) -> UUID:
        """The deterministic node id of a turn (same data, same ids, on every machine)."""
        return uuid5(NAMESPACE_URL, f"prme:locomo:{self.sample_id}:{dia_id}")

    def memories(self, scope: str = "personal") -> list[MemoryInput]:
        """Every turn as a memory input: ``Speaker: text`` plus the image caption where present."""
        items = []
        for turn in self.turns:
            content = f"{turn.speaker}: {turn.text}"
            if turn.caption:
                content += f" [image: {turn.caption}]"
            items.append(
                MemoryInput(
                    id=self.node_id(turn.dia_id),
                    content=content,
                    scope=scope,
                    node_type=NodeType.EVENT,
                    session_id=f"{self.sample_id}:session_{turn.session}",
                    event_time=turn.time,
                    epistemic_type="observed",
                    metadata={
                        "source": "locomo",
                        "dia_id": turn.dia_id,
                        "speaker": turn.speaker,
                        "session": turn.session,
                        "position": turn.position,
                    },
                )
            )
        return items

    def resolve(self, question: Question) -> tuple[tuple[UUID, ...], tuple[str, ...]]:
        """(resolvable evidence node ids, evidence ids that name no turn)."""
        found: list[UUID] = []
        missing: list[str] = []
        for ref in question.evidence:
            if ref in self._by_dia:
                node = self.node_id(ref)
                if node not in found:
                    found.append(node)
            else:
                missing.append(ref)
        return tuple(found), tuple(missing)


TENANT_ID = "locomo-tenant"


def tenant_conversation(conversations: Iterable[Conversation], sample_id: str = TENANT_ID) -> Conversation:
    """Every conversation as one owner's memory (one application's shared memory): turns and
    evidence ids are prefixed with their conversation's id (``conv-26:D1:3``) and sessions
    renumbered apart, so every turn is a candidate for every question and each question keeps
    exactly its own evidence. Questions keep their text, so the hash split puts each one on the
    same side as in the per-conversation runs."""
    turns: list[Turn] = []
    questions: list[Question] = []
    speakers: tuple[str, str] | None = None
    for c_index, conv in enumerate(conversations):
        speakers = speakers or conv.speakers
        base = (c_index + 1) * 1000
        for t in conv.turns:
            turns.append(
                Turn(f"{conv.sample_id}:{t.dia_id}", t.speaker, t.text, t.caption, base + t.session, t.position, t.time)
            )
        for q in conv.questions:
            questions.append(
                Question(
                    len(questions),
                    q.question,
                    q.answer,
                    tuple(f"{conv.sample_id}:{e}" for e in q.evidence),
                    q.category,
                )
            )
    if speakers is None:
        raise InvalidInput("conversations", "a tenant needs at least one conversation")
    return Conversation(sample_id, speakers, tuple(turns), tuple(questions), {t.dia_id: t for t in turns})


def locomo_path(path: str | Path | None = None) -> Path:
    """The LoCoMo file to read: ``path`` when given, else ``PRME_LOCOMO_PATH``.

    The library never guesses a location; an entry point may add a conventional one (``prme
    main`` falls back to ``../shared/data/locomo/locomo-dev.json``) and pass what it found.
    """
    chosen = path or os.environ.get(LOCOMO_PATH_ENV)
    if not chosen:
        raise LocomoDataNotFound(())
    if not Path(chosen).is_file():
        raise LocomoDataNotFound((Path(chosen),))
    return Path(chosen)


def parse_session_time(text: str, where: str) -> datetime:
    try:
        return datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInput(where, f"session clock {text!r} is not like '1:56 pm on 8 May, 2023'") from None


def _evidence_ids(raw: Any) -> tuple[str, ...]:
    ids: list[str] = []
    for item in raw or ():
        for part in _EVIDENCE_SPLIT.split(str(item)):
            if part:
                ids.append(part)
    return tuple(ids)


def parse_conversation(raw: dict[str, Any], where: str) -> Conversation:
    try:
        sample_id = str(raw["sample_id"])
        conv = raw["conversation"]
        speakers = (str(conv["speaker_a"]), str(conv["speaker_b"]))
    except (KeyError, TypeError) as exc:
        raise InvalidInput(where, f"not a LoCoMo conversation: missing {exc}") from None
    sessions = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)))
    turns: list[Turn] = []
    for number in sessions:
        clock_key = f"session_{number}_date_time"
        if clock_key not in conv:
            raise InvalidInput(f"{where}.conversation.{clock_key}", "missing session clock")
        clock = parse_session_time(conv[clock_key], f"{where}.conversation.{clock_key}")
        for position, item in enumerate(conv[f"session_{number}"]):
            turns.append(
                Turn(
                    dia_id=str(item["dia_id"]),
                    speaker=str(item["speaker"]),
                    text=str(item.get("text", "")),
                    caption=(str(item["blip_caption"]) if item.get("blip_caption") else None),
                    session=number,
                    position=position,
                    time=clock,
                )
            )
    questions = tuple(
        Question(
            index=i,
            question=str(q["question"]),
            answer=None if q.get("answer") is None else str(q["answer"]),
            evidence=_evidence_ids(q.get("evidence")),
            category=int(q.get("category", 0)),
        )
        for i, q in enumerate(raw.get("qa", []))
    )
    by_dia: dict[str, Turn] = {}
    for turn in turns:
        if turn.dia_id in by_dia:
            raise InvalidInput(where, f"dia_id {turn.dia_id} appears twice in {sample_id}")
        by_dia[turn.dia_id] = turn
    return Conversation(sample_id, speakers, tuple(turns), questions, by_dia)


def read_locomo(path: str | Path, sample_ids: Iterable[str] | None = None) -> list[Conversation]:
    """Read a file in the LoCoMo format (a JSON list of conversations); with ``sample_ids``, only
    those conversations (``select``)."""
    path = Path(path)
    if not path.is_file():
        raise LocomoDataNotFound((path,))
    try:
        data = parse_json(path.read_bytes())
    except CanonicalFormError as exc:
        raise InvalidInput("data", f"{path} is not JSON ({exc.__cause__ or exc}); pass a LoCoMo-format file") from None
    if not isinstance(data, list):
        raise InvalidInput("data", f"{path} must hold a JSON list of conversations")
    try:
        conversations = [_parse_item(item, f"data[{i}]") for i, item in enumerate(data)]
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.field}", str(exc).removeprefix(f"{exc.field}: ")) from None
    return select(conversations, sample_ids)


def _parse_item(item: Any, where: str) -> Conversation:
    """``parse_conversation``, with a malformed turn or question reported where it is."""
    try:
        return parse_conversation(item, where)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(where, f"not a LoCoMo conversation: {type(exc).__name__} {exc}") from None


def select(conversations: Iterable[Conversation], sample_ids: Iterable[str] | None) -> list[Conversation]:
    """Conversations by sample id, in file order; unknown ids are an error."""
    conversations = list(conversations)
    if sample_ids is None:
        return conversations
    wanted = list(sample_ids)
    known = {c.sample_id for c in conversations}
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise InvalidInput("conversations", f"unknown sample ids {unknown}; the file holds {sorted(known)}")
    return [c for c in conversations if c.sample_id in set(wanted)]


def load_conversation(client: Any, conversation: Conversation, scope: str = "personal") -> int:
    """Store a conversation's turns for its owner in one batch; return how many were new.

    Idempotent: a conversation already loaded is left alone; a partial earlier load (some ids
    present, some not) is refused rather than patched, because it means the data changed.
    """
    items = conversation.memories(scope)
    owner = conversation.sample_id
    with client.store.transaction() as tx:
        present = tx.existing_node_ids(owner, [item.id for item in items])
    if len(present) == len(items):
        return 0
    if present:
        raise InvalidInput(
            "data",
            f"{owner} is partly loaded ({len(present)} of {len(items)} turns); "
            "the data file changed since the last load: use a fresh store",
        )
    client.store_batch(owner, items)
    return len(items)


FEEDBACK_SHARE = 0.6
LOCOMO_SCOPE = "personal"


@dataclass(frozen=True)
class QuestionSplit:
    """An owner's questions split by a hash of the normalized question (never both sides)."""

    feedback: tuple[Question, ...]
    holdout: tuple[Question, ...]
    without_evidence: int
    unresolved_evidence_ids: tuple[str, ...]


def split_questions(conversation: Conversation, feedback_share: float = FEEDBACK_SHARE) -> QuestionSplit:
    """About ``feedback_share`` of the questions with resolvable evidence go to feedback, the
    rest to the holdout; identical normalized questions always land on the same side."""
    feedback, holdout, missing_ids = [], [], []
    without = 0
    for question in conversation.questions:
        nodes, missing = conversation.resolve(question)
        missing_ids.extend(missing)
        if not nodes:
            without += 1
            continue
        share = int(query_digest(question.question), 16) / float(2**256)
        (feedback if share < feedback_share else holdout).append(question)
    return QuestionSplit(tuple(feedback), tuple(holdout), without, tuple(missing_ids))


def conversation_clock(conversation: Conversation) -> datetime:
    """The reference time of questions about a conversation: one day after its last session."""
    from datetime import timedelta

    return max(t.time for t in conversation.turns) + timedelta(days=1)


def feedback_id(conversation: Conversation, question: Question) -> UUID:
    return uuid5(NAMESPACE_URL, f"prme:locomo-feedback:{conversation.sample_id}:{question.index}")


def record_feedback(
    client: Any,
    conversation: Conversation,
    questions: Iterable[Question],
    *,
    limit: int = 20,
    scope: str = LOCOMO_SCOPE,
    relabel: Callable[[Question, dict[UUID, bool]], dict[UUID, bool]] | None = None,
) -> dict[str, int]:
    """For each question: a real retrieval with base scoring, then structured-evaluation labels
    (returned evidence turns true, returned other turns false). Questions already judged (by
    their deterministic feedback id) are skipped, so a rerun adds nothing. ``relabel`` (for a
    null control) maps a question and its true labels to the labels recorded instead; the
    ``without_returned_evidence`` count is of the true labels."""
    owner = conversation.sample_id
    clock = conversation_clock(conversation)
    counts = {"recorded": 0, "already_recorded": 0, "without_returned_evidence": 0}
    for question in questions:
        fid = feedback_id(conversation, question)
        if client.get_relevance(fid, owner) is not None:
            counts["already_recorded"] += 1
            continue
        relevant = set(conversation.resolve(question)[0])
        response = client.retrieve(question.question, owner=owner, scopes=[scope], reference_time=clock, limit=limit)
        labels = {r.node_id: r.node_id in relevant for r in response.results}
        if not any(labels.values()):
            counts["without_returned_evidence"] += 1
        if relabel is not None:
            labels = relabel(question, labels)
        client.record_relevance(
            response.metadata.request_id, labels, owner=owner, method="structured_evaluation", feedback_id=fid
        )
        counts["recorded"] += 1
    return counts


def register_holdout(
    client: Any,
    conversation: Conversation,
    questions: Iterable[Question],
    *,
    limit: int = 20,
    scope: str = LOCOMO_SCOPE,
) -> int:
    """Register holdout questions with their complete evidence sets (idempotent)."""
    clock = conversation_clock(conversation)
    specs = [
        {
            "query": q.question,
            "relevant_node_ids": list(conversation.resolve(q)[0]),
            "reference_time": clock,
            "limit": limit,
        }
        for q in questions
    ]
    if not specs:
        return 0
    return len(client.register_holdout_queries(conversation.sample_id, [scope], specs))
