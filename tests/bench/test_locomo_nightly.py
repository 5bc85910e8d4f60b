"""The nightly-replay benchmark: a 2-night season of one development owner with one null seed
(skipped with a message where the LoCoMo data is absent) writes a well-formed report whose counts
add up; the night split and the recording-time shuffle are deterministic; tenant mode replays
the chosen conversations as one owner."""

import json
from uuid import UUID

import pytest

from benchmarks import locomo_nightly
from benchmarks.locomo_learning import policy_from, policy_overrides
from benchmarks.locomo_nightly import check_report, split_nights
from benchmarks.locomo_null import shuffled_labels
from benchmarks.locomo_report import GATE_NAMES
from prme_core.datasets.locomo import TENANT_ID, Question, read_locomo, split_questions
from prme_core.errors import InvalidInput
from tests.locomo_data import DATA, needs_data

OWNER = "conv-42"
"""Its 150 feedback questions hold 103 training and 18 validation groups: at the default 15%
validation share every night stops at the coverage gate (20 validation groups), which names itself."""


def _two_nights(tmp_path_factory, seeds: int, *extra: str) -> tuple[dict, str]:
    """A 2-night run of ``OWNER`` with ``seeds`` null seeds: (its results.json, its results.md)."""
    out = tmp_path_factory.mktemp("locomo-nightly")
    argv = ["--data", str(DATA), "--owners", OWNER, "--nights", "2", "--seeds", str(seeds), "--out", str(out)]
    assert locomo_nightly.main([*argv, *extra]) == 0
    return json.loads((out / "results.json").read_text()), out


@pytest.fixture(scope="module")
def nightly_run(tmp_path_factory):
    return _two_nights(tmp_path_factory, 1)


@needs_data
def test_two_night_season_report_is_well_formed(nightly_run):
    report, out = nightly_run
    check_report(report)  # raises unless every count adds up
    assert [s["owner"] for s in report["real"]] == [OWNER]
    assert [(s["owner"], s["seed"]) for s in report["null"]] == [(OWNER, 0)]
    for season in [*report["real"], *report["null"]]:
        nights = season["nights"]
        assert [n["night"] for n in nights] == [1, 2]
        assert sum(n["questions"] for n in nights) == season["feedback_questions"] > 0
        assert nights[-1]["feedback_records"] == season["feedback_questions"]
        for n in nights:
            assert n["decision"] and set(n["checks"]) == set(GATE_NAMES)
            assert n["dagster_run_success"]
        # all feedback in, still 18 of the 20 validation groups: the coverage gate stops the night
        assert not nights[-1]["offline"]["reached"] and nights[-1]["stopped_by"] == "coverage_sufficient"
        assert nights[-1]["checks"]["coverage_sufficient"] != "pass"
    total = report["null_summary"]["total"]
    flat = report["null"][0]["nights"]
    assert total["nights"] == 2 and total["owner_seasons"] == 1
    assert total["looks"] == sum(n["offline"]["reached"] for n in flat) == 0
    assert total["offline_accepts"] == sum(n["checks"]["offline_gate_passed"] == "pass" for n in flat)
    assert total["activations"] == sum(n["activation"]["activated"] for n in flat)
    assert [r["night"] for r in report["null_summary"]["per_night"]] == [1, 2]
    (real,) = report["real_summary"]
    assert real["owner"] == OWNER and real["activations"] == len(report["real"][0]["activation_nights"])
    md = (out / "results.md").read_text()
    assert f"| {OWNER} |" in md and "Null control per night" in md and "Total wall time" in md
    assert (out / "seasons.jsonl").read_text().count("\n") == 2


def _questions(n: int) -> tuple[Question, ...]:
    return tuple(Question(i, f"q{i}", None, ("D1:1",), 1) for i in range(n))


def test_nights_keep_question_order_and_sizes_differ_by_at_most_one():
    parts = split_nights(_questions(23), 10)
    assert [len(p) for p in parts] == [3, 3, 3, 2, 2, 2, 2, 2, 2, 2]
    assert [q.index for p in parts for q in p] == list(range(23))
    assert [len(p) for p in split_nights(_questions(2), 3)] == [1, 1, 0]


def test_recording_time_shuffle_is_seeded_by_seed_and_position():
    labels = {UUID(int=i): i < 2 for i in range(20)}
    first = shuffled_labels(labels, 3, 7)
    assert first == shuffled_labels(labels, 3, 7)
    assert sorted(first) == sorted(labels) and sum(first.values()) == 2
    assert any(shuffled_labels(labels, 3, p) != first for p in range(8, 12))
    assert any(shuffled_labels(labels, s, 7) != first for s in range(4, 8))


@needs_data
def test_check_report_catches_counts_that_do_not_add_up(nightly_run):
    _, out = nightly_run
    report = json.loads((out / "results.json").read_text())
    report["null_summary"]["total"]["looks"] += 1
    with pytest.raises(AssertionError):
        check_report(report)


@pytest.fixture(scope="module")
def nightly_run_with_policy(tmp_path_factory):
    """conv-42's real-label season under a policy of the test's own: 15 validation groups suffice,
    so the second night (all 18) reaches the offline gate and the nightly report records it."""
    return _two_nights(tmp_path_factory, 0, "--policy", "min_validation_queries=15")


@needs_data
def test_a_night_that_reaches_the_offline_gate_is_reported_with_its_numbers(nightly_run_with_policy):
    report, out = nightly_run_with_policy
    check_report(report)
    assert report["options"]["policy_overrides"] == {"min_validation_queries": 15}
    assert report["policy"]["min_validation_queries"] == 15
    (season,) = report["real"]
    first, second = season["nights"]
    assert not first["offline"]["reached"] and first["stopped_by"] == "coverage_sufficient"
    assert first["validation_groups"] < 15 <= second["validation_groups"]
    offline = second["offline"]
    assert offline["reached"] and offline["decision"] and offline["gain"] is not None
    assert offline["interval"] is not None and offline["interval"][0] <= offline["gain"] <= offline["interval"][1]
    evidence = offline["evidence"]  # what the version-3 gate decided on: validation and cross-fitted groups
    assert evidence["groups"] > second["validation_groups"] and 0.0 < evidence["sign_flip_p"] <= 1.0
    assert first["offline"]["evidence"] is None
    assert second["checks"]["coverage_sufficient"] == "pass"
    assert offline["accepted"] == (second["checks"]["offline_gate_passed"] == "pass")
    assert second["stopped_by"] != "coverage_sufficient"
    md = (out / "results.md").read_text()
    assert "learning policy: the defaults but min_validation_queries = 15" in md
    assert f"evidence {evidence['groups']} groups" in md and f"p {evidence['sign_flip_p']:.4f}; proposal" in md


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["min_validation_queries"], "expected FIELD=VALUE"),
        (["min_validaton_queries=15"], "'min_validaton_queries' is not a learning-policy field"),
        (["max_p_value=0.05", "max_p_value=0.01"], "max_p_value is given twice"),
    ],
)
def test_a_policy_override_that_names_no_field_once_is_refused(items, message):
    with pytest.raises(InvalidInput, match=message):
        policy_overrides(items)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("validation_fraction=1.5", "validation_fraction: Input should be less than 1"),
        ("holdout_max_mean_harm=-1", "holdout_max_mean_harm: Input should be greater than or equal to 0"),
        ("min_validation_queries=many", "min_validation_queries: Input should be a valid integer"),
    ],
)
def test_an_out_of_bounds_policy_value_is_refused_naming_its_policy_field(item, message):
    with pytest.raises(InvalidInput, match=message):
        policy_from(policy_overrides([item]))


def test_committed_results_are_never_written_under_another_policy(tmp_path):
    argv = ["--data", str(tmp_path / "absent.json"), "--update-results", "--policy", "max_p_value=0.05"]
    with pytest.raises(InvalidInput, match="the committed results are the default policy's"):
        locomo_nightly.main(argv)


@needs_data
def test_tenant_mode_replays_the_chosen_conversations_as_one_owner(tmp_path):
    out = tmp_path / "tenant"
    argv = ["--data", str(DATA), "--owners", "conv-30,conv-44", "--tenant", "--nights", "1", "--seeds", "0"]
    assert locomo_nightly.main([*argv, "--out", str(out)]) == 0
    report = json.loads((out / "results.json").read_text())
    check_report(report)
    assert report["options"]["tenant"] and report["options"]["owners"] == ["conv-30", "conv-44"]
    (season,) = report["real"]
    assert report["data"]["owners"] == [season["owner"]] == [TENANT_ID]
    singles = [split_questions(c).feedback for c in read_locomo(DATA, ["conv-30", "conv-44"])]
    assert season["feedback_questions"] == sum(len(f) for f in singles) == season["nights"][0]["feedback_records"]
    md = (out / "results.md").read_text()
    assert "tenant mode: conversations conv-30, conv-44 under one owner" in md and f"| {TENANT_ID} |" in md


def test_tenant_results_are_committed_beside_the_per_owner_ones():
    parse = locomo_nightly.build_parser().parse_args
    assert locomo_nightly.output_dir(parse(["--update-results", "--tenant"])) == locomo_nightly.TENANT_OUT
    assert locomo_nightly.output_dir(parse(["--update-results"])) == locomo_nightly.COMMITTED_OUT
    assert locomo_nightly.TENANT_OUT != locomo_nightly.COMMITTED_OUT


def test_a_tenant_of_other_conversations_never_resumes_anothers_season():
    policy = policy_from({})
    key = lambda members: locomo_nightly.season_key(  # noqa: E731
        data_sha256="0" * 64,
        owner=TENANT_ID,
        seed=None,
        nights=10,
        limit=20,
        embedding="hashed",
        policy=policy,
        members=members,
    )
    assert len({key(None), key(["conv-30", "conv-44"]), key(["conv-30", "conv-41"])}) == 3
    assert key(["conv-30", "conv-44"]) == key(["conv-30", "conv-44"])
