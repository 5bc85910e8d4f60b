"""Query signals (intent, current state, episodic, aggregation, windows), content detectors
(dates, update language) and temporal affinity."""

import math
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from pydantic import ValidationError

from prme_core.errors import InvalidInput
from prme_core.retrieval.query_analysis import (
    QueryAnalysis,
    analyze_query,
    has_date,
    has_update_language,
    temporal_affinity,
)
from prme_core.types import to_epoch_us

NOW = datetime(2024, 3, 15, 14, 30, tzinfo=UTC)
DAY_US = 86_400 * 1_000_000


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# query, intent, explicit, implicit, current_state, episodic, aggregation, relational_shift_eligible
SIGNALS = [
    ("Where does Caroline currently live?", "general", True, False, True, False, False, False),
    ("What car does Melanie drive?", "general", False, True, True, False, False, True),
    ("Who is the CEO?", "general", False, True, True, False, False, False),
    ("What sport and hobby does Jon like?", "general", False, True, True, False, False, False),
    ("Do I have a dog?", "general", True, False, True, False, False, False),
    ("What is my latest project?", "general", True, False, True, False, False, False),
    ("What time does the gym open currently?", "temporal", True, True, True, False, False, True),
    ("Who is the team lead in 2023?", "temporal", False, True, False, False, False, False),
    ("When did Caroline go to the LGBTQ support group?", "temporal", False, False, False, False, False, False),
    ("How long have I lived here now?", "temporal", True, False, False, False, False, False),
    ("What editor do I use now, and what did I use before?", "general", True, False, False, False, False, False),
    ("What job did Caroline have originally?", "general", False, False, False, False, False, False),
    ("How many times has Melanie gone camping?", "general", False, False, False, False, True, False),
    ("How often do I go running these days?", "general", True, False, False, False, True, False),
    ("What did we talk about yesterday?", "temporal", False, False, False, True, False, False),
    ("What did I just mention about the trip?", "general", False, False, False, True, False, False),
    ("Did we discuss the budget this morning?", "general", False, False, False, True, False, False),
    ("Who was the CEO before 2020?", "temporal", False, False, False, False, False, False),
    ("What happened three weeks ago?", "temporal", False, False, False, False, False, False),
    ("Which month did Jon open the studio?", "temporal", False, False, False, False, False, False),
    ("Did Melanie paint before the wedding?", "general", False, False, False, False, False, False),
    ("What did Melanie do after June?", "temporal", False, False, False, False, False, False),
    ("Tell me about Caroline's adoption plans", "general", False, False, False, False, False, False),
]


@pytest.mark.parametrize("row", SIGNALS, ids=[row[0] for row in SIGNALS])
def test_query_signals_match_the_example_table(row):
    a = analyze_query(row[0], NOW)
    got = (
        a.intent,
        a.explicit_current,
        a.implicit_current,
        a.current_state,
        a.episodic,
        a.aggregation,
        a.relational_shift_eligible,
    )
    assert got == row[1:]


def test_analysis_records_the_normalized_query():
    assert analyze_query("  Where does Caroline  LIVE? ", NOW).normalized == "where does caroline live?"


def test_implicit_current_counts_only_with_update_evidence_and_explicit_always():
    implicit = analyze_query("Who is the CEO?", NOW)
    explicit = analyze_query("Who is the current CEO?", NOW)
    assert not implicit.is_current(update_evidence=False) and implicit.is_current(update_evidence=True)
    assert explicit.is_current(update_evidence=False)
    assert not analyze_query("How many CEOs were there?", NOW).is_current(update_evidence=True)


def test_relational_shift_applies_only_without_update_evidence():
    a = analyze_query("What car does Melanie drive?", NOW)
    assert a.relational_shift(update_evidence=False) and not a.relational_shift(update_evidence=True)


WINDOWS = [
    ("What did I eat yesterday?", utc(2024, 3, 14), utc(2024, 3, 15)),
    ("What is on my calendar today?", utc(2024, 3, 15), utc(2024, 3, 16)),
    ("What did we decide last week?", NOW - timedelta(days=7), NOW),
    ("What did I read last month?", utc(2024, 2, 1), utc(2024, 3, 1)),
    ("Where did we travel last year?", utc(2023, 1, 1), utc(2024, 1, 1)),
    ("What have I learned this year?", utc(2024, 1, 1), utc(2025, 1, 1)),
    ("What did Caroline do in May 2023?", utc(2023, 5, 1), utc(2023, 6, 1)),
    ("What happened in Dec. 2023?", utc(2023, 12, 1), utc(2024, 1, 1)),
    ("Where did Jon work in 2019?", utc(2019, 1, 1), utc(2020, 1, 1)),
    ("What did Caroline do on 8 May 2023?", utc(2023, 5, 8), utc(2023, 5, 9)),
    ("What did Caroline do on the 8th of May, 2023?", utc(2023, 5, 8), utc(2023, 5, 9)),
    ("What happened on May 8, 2023?", utc(2023, 5, 8), utc(2023, 5, 9)),
    ("What happened on February 29 2024 in 2023?", utc(2024, 2, 29), utc(2024, 3, 1)),
]


@pytest.mark.parametrize(("query", "start", "end"), WINDOWS, ids=[row[0] for row in WINDOWS])
def test_supported_phrases_resolve_to_a_half_open_utc_window(query, start, end):
    a = analyze_query(query, NOW)
    assert (a.window_start, a.window_end) == (start, end)


def test_last_month_in_january_is_december_of_the_previous_year():
    a = analyze_query("What did I buy last month?", utc(2024, 1, 10, 9))
    assert (a.window_start, a.window_end) == (utc(2023, 12, 1), utc(2024, 1, 1))


def test_relative_windows_follow_the_reference_time_in_utc():
    tokyo_morning = datetime(2024, 3, 16, 8, 0, tzinfo=timezone(timedelta(hours=9)))  # 2024-03-15 23:00 UTC
    a = analyze_query("What did I eat yesterday?", tokyo_morning)
    assert (a.window_start, a.window_end) == (utc(2024, 3, 14), utc(2024, 3, 15))


@pytest.mark.parametrize(
    "query",
    [
        "What does Jon do?",
        "When did we meet?",
        "What happened on 31 February 2023?",
        "What happened on 2023-05-08?",
        "Who was the CEO before 2020?",
    ],
)
def test_queries_without_a_supported_phrase_have_no_window(query):
    a = analyze_query(query, NOW)
    assert a.window_start is None and a.window_end is None


def test_naive_reference_time_is_rejected():
    with pytest.raises(InvalidInput, match="reference_time"):
        analyze_query("today", datetime(2024, 3, 15))


def test_analysis_with_an_inverted_window_does_not_load():
    fields = dict(
        normalized="q",
        intent="temporal",
        explicit_current=False,
        implicit_current=False,
        current_state=False,
        episodic=False,
        aggregation=False,
        relational_shift_eligible=False,
    )
    with pytest.raises(ValidationError, match="window_start"):
        QueryAnalysis(**fields, window_start=utc(2024, 2, 1), window_end=utc(2024, 1, 1))
    with pytest.raises(ValidationError, match="current_state"):
        QueryAnalysis(**{**fields, "current_state": True})


@pytest.mark.parametrize(
    "text",
    [
        "We changed to a four-day week.",
        "The team switched to Postgres.",
        "We migrated from MySQL last spring.",
        "The service moved to Frankfurt.",
        "Jenkins was replaced by Argo.",
        "Version updated to 2.1.",
        "The app now uses OAuth.",
        "I no longer drink coffee.",
        "The parser was rewritten in Rust.",
        "We upgraded to Python 3.12.",
        "My new phone number is 555-0100.",
        "The new office is in Leeds.",
        "Effective immediately, badges are required.",
        "I updated my address.",
        "I changed jobs and I now work at a bakery.",
        "They moved offices; the team is now remote.",
    ],
)
def test_update_language_is_detected(text):
    assert has_update_language(text)


@pytest.mark.parametrize(
    "text",
    [
        "I like coffee in the morning.",
        "Caroline went to the support group.",
        "We talked about new ideas today.",
        "I changed my mind. Now I want tea.",
        "I moved the couch " + "and then we spent a very long afternoon cleaning every room in the house " + "now",
    ],
)
def test_text_without_update_language_is_not_flagged(text):
    assert not has_update_language(text)


@pytest.mark.parametrize(
    "text",
    [
        "See you on 8 May 2023.",
        "Born March 3rd.",
        "It was June.",
        "In May 2023 we met.",
        "Due 2023-05-08.",
        "Filed 2023/5/8.",
        "Paid on 5/8/2023.",
        "Back in 1999.",
        "The 8th of may",
        "Sept. 2021 trip",
        "DEC 25",
    ],
)
def test_dates_are_detected(text):
    assert has_date(text)


@pytest.mark.parametrize(
    "text",
    [
        "You may go now.",
        "I have 3 cats.",
        "Call me at 10:30.",
        "Room 12345.",
        "The market is open.",
        "Year 1850.",
        "I saw Jan at the dock.",
    ],
)
def test_text_without_a_date_is_not_flagged(text):
    assert not has_date(text)


def test_temporal_affinity_inside_the_window_is_date_bonus_plus_full_proximity():
    start, end = to_epoch_us(utc(2023, 5, 1)), to_epoch_us(utc(2023, 6, 1))
    times = np.array([start, to_epoch_us(utc(2023, 5, 20)), end - 1], dtype=np.int64)
    got = temporal_affinity(np.array([True, False, True]), times, start, end)
    assert got.dtype == np.float64 and got.tolist() == [1.0, 0.7, 1.0]


def test_temporal_affinity_decays_with_days_to_the_nearest_edge():
    start, end = to_epoch_us(utc(2023, 5, 1)), to_epoch_us(utc(2023, 6, 1))
    times = np.array([start - 10 * DAY_US, end + 50 * DAY_US, end + 3650 * DAY_US], dtype=np.int64)
    got = temporal_affinity(np.array([False, True, False]), times, start, end)
    assert got[0] == pytest.approx(0.7 * math.exp(-0.2))
    assert got[1] == pytest.approx(0.3 + 0.7 * math.exp(-1.0))
    assert got[2] < 1e-30


def test_temporal_affinity_with_a_one_sided_window_measures_to_its_edge():
    edge = to_epoch_us(utc(2023, 5, 1))
    times = np.array([edge - 5 * DAY_US, edge + 5 * DAY_US], dtype=np.int64)
    after = temporal_affinity(np.array([False, False]), times, edge, None)
    before = temporal_affinity(np.array([False, False]), times, None, edge)
    assert after.tolist() == pytest.approx([0.7 * math.exp(-0.1), 0.7])
    assert before.tolist() == pytest.approx([0.7, 0.7 * math.exp(-0.1)])


def test_temporal_affinity_without_a_window_is_065_for_dated_content_else_zero():
    got = temporal_affinity(np.array([True, False]), np.array([0, 10**15], dtype=np.int64), None, None)
    assert got.tolist() == pytest.approx([0.65, 0.0])


def test_temporal_affinity_rejects_mismatched_inputs():
    with pytest.raises(InvalidInput, match="times_us"):
        temporal_affinity(np.array([True, False]), np.array([0], dtype=np.int64), None, None)
    with pytest.raises(InvalidInput, match="window_start_us"):
        temporal_affinity(np.array([True]), np.array([0], dtype=np.int64), 10, 10)
