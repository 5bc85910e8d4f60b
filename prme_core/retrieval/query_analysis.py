"""What a query asks for (time, current state, recent episodes, totals) and what content says
(dates, updates), detected with regular expressions compiled once at import.

Query patterns run on ``normalize_query`` text (casefolded, single spaces); content patterns
run on raw text, case-insensitively. Windows are half-open ``[start, end)`` in UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Literal

import numpy as np
from pydantic import model_validator

from prme_core.errors import InvalidInput
from prme_core.retrieval.text import normalize_query
from prme_core.types import FrozenModel, UtcDatetime

HAS_DATE_WEIGHT = 0.3
PROXIMITY_WEIGHT = 0.7
PROXIMITY_DECAY_PER_DAY = 0.02
NO_WINDOW_PROXIMITY = 0.5
_US_PER_DAY = 86_400 * 1_000_000

_MONTH_NUMBERS: dict[str, int] = {
    "january": 1,
    "jan": 1,
    "february": 2,
    "feb": 2,
    "march": 3,
    "mar": 3,
    "april": 4,
    "apr": 4,
    "may": 5,
    "june": 6,
    "jun": 6,
    "july": 7,
    "jul": 7,
    "august": 8,
    "aug": 8,
    "september": 9,
    "sept": 9,
    "sep": 9,
    "october": 10,
    "oct": 10,
    "november": 11,
    "nov": 11,
    "december": 12,
    "dec": 12,
}
_MONTH = "(?:" + "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True)) + r")\b\.?"
_BARE_MONTH = r"(?:january|february|march|april|june|july|august|september|october|november|december)"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d{2}"

_HAS_DATE = re.compile(
    rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}"  # 8 May, 8th of May (2023)
    rf"|\b{_MONTH}\s+{_DAY}\b"  # May 8, May 8th
    rf"|\b{_MONTH},?\s+{_YEAR}\b"  # May 2023
    rf"|\b{_BARE_MONTH}\b"  # June (bare "may" is too often the verb)
    r"|\b\d{4}[-/]\d{1,2}[-/]\d{1,2}\b"  # 2023-05-08, 2023/5/8
    r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b"  # 5/8/2023
    rf"|\b{_YEAR}\b",  # 1900-2099
    re.IGNORECASE,
)

_UPDATE = re.compile(
    r"\b(?:changed|switched|moved|upgraded)\s+to\b|\bmigrated\s+(?:from|to)\b|\breplaced\b"
    r"|\bupdated\b|\bnow\s+uses?\b|\bno\s+longer\b|\brewritten\b|\beffective\s+immediately\b"
    r"|\bnew\s+[^\W_]+(?:\s+[^\W_]+)?\s+is\b"
    r"|\b(?:changed|moved)\b[^.!?\n]{0,80}?\bnow\b",
    re.IGNORECASE,
)

_TEMPORAL = re.compile(
    r"\b(?:when|what time|what date|what year|which year|which month|how long(?: ago)?|since when"
    r"|ago|last (?:week|month|year)|yesterday)\b"
    r"|\b(?:before|after) (?:(?:the|last|next) )?(?:\d|(?:yesterday|today|tomorrow|week|weekend|month|year"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|january|february|march|april|may|june|july|august|september|october|november|december)\b)"
)
_AGGREGATION = re.compile(r"\b(?:how many|how often|list all|all the|every time|in total)\b")
_EXPLICIT_CURRENT = re.compile(
    r"\b(?:current|currently|now|latest|today|at the moment|these days|presently|so far|usually"
    r"|typically|normally|most recently|right now)\b"
    r"|^(?:do|does|am|are|have|has) i\b"
    r"|\bdo i (?:go|have|use|own|keep|play|attend|work)\b"
)
_IMPLICIT_CURRENT = re.compile(r"^(?:who (?:is|are)\b|what(?: \S+){1,4}? (?:does|is|has)\b)")
_WHAT_DOES = re.compile(r"^what\b(.*?)\bdoes\b")
_AND_OR = re.compile(r"\b(?:and|or)\b")
_DURATION = re.compile(r"\b(?:how long|since when|when did|elapsed)\b")
_NOT_PRESENT = re.compile(r"\b(?:before|after|previously|formerly|originally|used to)\b")
_EPISODIC = re.compile(
    r"\b(?:recently|last time|the other day|earlier today|yesterday|this (?:morning|afternoon|evening|week)"
    r"|just (?:now|told|tell|said|say|mention(?:ed)?|ask(?:ed)?)|remember when"
    r"|did (?:i|we) (?:talk|discuss|mention|say))\b"
)

_MONTH_GROUP = "(?P<month>" + "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True)) + r")\b\.?"
_WINDOW_DAY = (
    re.compile(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_GROUP},?\s+(?P<year>{_YEAR})\b"),
    re.compile(rf"\b{_MONTH_GROUP}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>{_YEAR})\b"),
)
_WINDOW_MONTH = re.compile(rf"\bin {_MONTH_GROUP},? (?P<year>{_YEAR})\b")
_WINDOW_YEAR = re.compile(rf"\bin (?P<year>{_YEAR})\b(?![-/]\d)")
_WINDOW_RELATIVE = re.compile(r"\b(?:yesterday|today|last week|last month|last year|this year)\b")


class QueryAnalysis(FrozenModel):
    """The signals a query carries; ``current_state`` is decided before looking at candidates."""

    normalized: str
    intent: Literal["temporal", "general"]
    explicit_current: bool
    implicit_current: bool
    current_state: bool
    episodic: bool
    aggregation: bool
    relational_shift_eligible: bool
    window_start: UtcDatetime | None = None
    window_end: UtcDatetime | None = None

    @model_validator(mode="after")
    def _consistent(self) -> QueryAnalysis:
        if self.window_start is not None and self.window_end is not None and self.window_start >= self.window_end:
            raise ValueError(f"window_start ({self.window_start}) must be before window_end ({self.window_end})")
        if self.current_state and (self.aggregation or not (self.explicit_current or self.implicit_current)):
            raise ValueError("current_state needs explicit or implicit current wording and no aggregation")
        if self.relational_shift_eligible and not self.implicit_current:
            raise ValueError("relational_shift_eligible needs implicit_current")
        return self

    def is_current(self, update_evidence: bool) -> bool:
        """Current-state after the candidates are known: implicit-only wording needs some
        candidate with update language to count."""
        return self.current_state and (self.explicit_current or update_evidence)

    def relational_shift(self, update_evidence: bool) -> bool:
        """Move the lexical weight onto semantic: a "what … does" question without update evidence."""
        return self.relational_shift_eligible and not update_evidence


def has_date(text: str) -> bool:
    """True if the text mentions a calendar date, a month (with a day or year) or a year 1900-2099."""
    return _HAS_DATE.search(text) is not None


def has_update_language(text: str) -> bool:
    """True if the text reads like a change of state ("switched to", "no longer", "updated" …)."""
    return _UPDATE.search(text) is not None


def analyze_query(query: str, reference_time: datetime) -> QueryAnalysis:
    """Detect intent, current-state, episodic and aggregation wording, and the time window."""
    if reference_time.tzinfo is None or reference_time.utcoffset() is None:
        raise InvalidInput("reference_time", "must be timezone-aware; attach a timezone (UTC is used)")
    q = normalize_query(query)
    temporal = _TEMPORAL.search(q) is not None or has_date(q)
    aggregation = _AGGREGATION.search(q) is not None
    explicit = _EXPLICIT_CURRENT.search(q) is not None
    implicit = _IMPLICIT_CURRENT.search(q) is not None
    current_state = (
        not aggregation
        and _DURATION.search(q) is None
        and _NOT_PRESENT.search(q) is None
        and (explicit or (implicit and not temporal))
    )
    what_does = _WHAT_DOES.match(q)
    relational = implicit and what_does is not None and _AND_OR.search(what_does.group(1)) is None
    start, end = _window(q, reference_time.astimezone(UTC))
    return QueryAnalysis(
        normalized=q,
        intent="temporal" if temporal else "general",
        explicit_current=explicit,
        implicit_current=implicit,
        current_state=current_state,
        episodic=_EPISODIC.search(q) is not None,
        aggregation=aggregation,
        relational_shift_eligible=relational,
        window_start=start,
        window_end=end,
    )


def _window(q: str, now: datetime) -> tuple[datetime | None, datetime | None]:
    """The query's time window: a calendar day, month or year beats a relative phrase."""
    for pattern in _WINDOW_DAY:
        for m in pattern.finditer(q):
            try:
                day = datetime(int(m["year"]), _MONTH_NUMBERS[m["month"]], int(m["day"]), tzinfo=UTC)
            except ValueError:
                continue
            return day, day + timedelta(days=1)
    if m := _WINDOW_MONTH.search(q):
        return _month_span(int(m["year"]), _MONTH_NUMBERS[m["month"]])
    if m := _WINDOW_YEAR.search(q):
        return _year_span(int(m["year"]))
    m = _WINDOW_RELATIVE.search(q)
    if m is None:
        return None, None
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    phrase = m.group(0)
    if phrase == "yesterday":
        return midnight - timedelta(days=1), midnight
    if phrase == "today":
        return midnight, midnight + timedelta(days=1)
    if phrase == "last week":
        return now - timedelta(days=7), now
    if phrase == "last month":
        return _month_span(now.year - 1, 12) if now.month == 1 else _month_span(now.year, now.month - 1)
    return _year_span(now.year - 1 if phrase == "last year" else now.year)


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)


def _year_span(year: int) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def temporal_affinity(
    has_date: np.ndarray, times_us: np.ndarray, window_start_us: int | None, window_end_us: int | None
) -> np.ndarray:
    """0.3·has_date + 0.7·proximity per candidate (float64).

    Proximity is 1 inside the half-open window and exp(−0.02·days to the nearest edge) outside
    (a one-sided window has one edge); without a window it is 0.5·has_date.
    """
    dated = np.asarray(has_date, dtype=bool)
    times = np.asarray(times_us, dtype=np.int64)
    if dated.ndim != 1 or times.shape != dated.shape:
        raise InvalidInput("times_us", f"must be 1-dimensional and match has_date; got {times.shape} and {dated.shape}")
    if window_start_us is not None and window_end_us is not None and window_start_us >= window_end_us:
        raise InvalidInput("window_start_us", f"must be before window_end_us; got {window_start_us} >= {window_end_us}")
    flag = dated.astype(np.float64)
    if window_start_us is None and window_end_us is None:
        return HAS_DATE_WEIGHT * flag + PROXIMITY_WEIGHT * (NO_WINDOW_PROXIMITY * flag)
    gap = np.zeros(times.shape, dtype=np.int64)
    if window_start_us is not None:
        gap = np.maximum(gap, np.int64(window_start_us) - times)
    if window_end_us is not None:
        gap = np.maximum(gap, times - np.int64(window_end_us))
    proximity = np.exp(-PROXIMITY_DECAY_PER_DAY * (gap.astype(np.float64) / _US_PER_DAY))
    return HAS_DATE_WEIGHT * flag + PROXIMITY_WEIGHT * proximity
