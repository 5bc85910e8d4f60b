"""Test tiers: every test gets exactly one tier marker from where it lives and what it uses,
so ``-m`` selects a tier without a marker on every function.

* ``server`` — starts a real server, worker or subprocess (Uvicorn, dagster-webserver, Celery,
  the ``prme`` command, a multiprocess Dagster run);
* ``dagster`` — materializes assets or runs jobs on a Dagster instance in this process;
* ``contract`` — runs once per storage backend (DuckDB and PostgreSQL);
* ``unit`` — everything else: one module's behaviour, in memory or on a temporary file.

``slow`` is added beside the tier for the files whose tests take more than about ten seconds and
the single tests of 2.5 seconds or more on the 2-core development machine (measured with
``--durations``), so that the fast tier for day-to-day work, ``-m "not slow and not server"``,
stays under three minutes there with PostgreSQL (run on both cores: ``-n auto``, pytest-xdist). ``locomo`` marks tests that need the LoCoMo development data:
they skip where it is absent, and fail under CI, which must run them.
"""

from __future__ import annotations

import pytest

TIERS = ("unit", "contract", "dagster", "server")

SERVER_FILES = {
    "tests/api/test_http.py",
    "tests/api/test_mcp.py",
    "tests/assets/test_celery_executor.py",
    "tests/assets/test_dagster_webserver.py",
    "tests/assets/test_operator_cli.py",
    "tests/assets/test_api_cli.py",
    "tests/test_readme_tour.py",
    "tests/storage/test_damaged_store.py",
    "tests/api/test_api_docs.py",
    "tests/api/test_http_strictness.py",
    "tests/api/test_probe_defects.py",
    "tests/assets/test_cli_defects.py",
    "tests/assets/test_forget_cli.py",
    "tests/assets/test_main_sample.py",
    "tests/api/test_agent_tools.py",
    "tests/api/test_evidence_bound.py",
    "tests/api/test_roles.py",
    "tests/api/test_scoped_ids.py",
}
"""Files whose tests start a server, a worker or a subprocess."""
SERVER_TESTS = ("multiprocess",)
"""Test-name fragments that mean a subprocess (a multiprocess Dagster run) in any file."""

SLOW_FILES = {
    "tests/bench/test_locomo_benchmark.py",
    "tests/bench/test_locomo_nightly.py",
    "tests/bench/test_locomo_tuning.py",
    "tests/bench/test_scale_benchmark.py",
    "tests/bench/test_http_benchmark.py",
    "tests/assets/test_locomo.py",
    "tests/assets/test_batched_learning.py",
    "tests/test_layers.py",
    "tests/test_lint.py",
}
"""Files whose tests each take more than about ten seconds."""
SLOW_TESTS: set[str] = {
    "tests/assets/test_dagster_outcomes.py::test_a_candidate_profile_materialized_alone_after_a_holdout_no_creates_nothing",
    "tests/assets/test_dagster_outcomes.py::test_a_holdout_no_improvement_ends_the_run_successfully_without_a_profile",
    "tests/assets/test_dagster_outcomes.py::test_a_holdout_short_of_groups_says_how_many_more_holdout_queries_it_needs",
    "tests/assets/test_dagster_outcomes.py::test_a_memory_change_during_the_holdout_fails_the_run",
    "tests/assets/test_dagster_outcomes.py::test_a_passing_run_records_its_outcome_and_profile",
    "tests/assets/test_dagster_outcomes.py::test_an_offline_no_improvement_ends_the_run_successfully_before_the_holdout",
    "tests/assets/test_dagster_outcomes.py::test_no_registered_holdout_queries_is_an_expected_no",
    "tests/assets/test_dagster_pipeline.py::test_a_failing_holdout_gate_stops_before_any_profile",
    "tests/assets/test_dagster_pipeline.py::test_a_failing_offline_gate_stops_before_the_holdout",
    "tests/assets/test_dagster_pipeline.py::test_a_memory_change_during_the_holdout_fails_the_memory_gate",
    "tests/assets/test_dagster_pipeline.py::test_a_stale_baseline_stops_at_the_evidence_check_and_is_never_activated",
    "tests/assets/test_dagster_pipeline.py::test_operator_jobs_rerun_with_their_change_id_change_nothing_and_say_so",
    "tests/assets/test_dagster_pipeline.py::test_rerunning_the_activation_job_after_a_deactivation_activates_nothing_and_says_why",
    "tests/assets/test_dagster_pipeline.py::test_the_sensor_refuses_a_profile_whose_baseline_went_stale_after_its_gates",
    "tests/assets/test_dagster_ui.py::test_an_offline_no_is_a_warning_with_three_short_run_tags_and_a_refusal_named_by_what_decided",
    "tests/assets/test_dagster_ui.py::test_the_pointer_jobs_run_for_their_partition_and_report_the_active_profile",
    "tests/assets/test_definitions.py::test_dagster_cli_validates_the_workspace",
    "tests/feedback/test_citation_concurrency.py::test_concurrent_retries_of_one_citation_id_all_return_the_stored_record",
    "tests/feedback/test_citation_concurrency.py::test_duckdb_processes_taking_turns_on_one_file_all_return_the_stored_record",
    "tests/learning/test_gates_v3.py::test_a_long_season_of_looks_at_noise_stays_within_the_budget",
    "tests/learning/test_gates_v3.py::test_noise_is_confirmed_on_a_look_at_most_at_that_looks_level",
    "tests/learning/test_gates_v4.py::test_a_long_season_of_nightly_proposals_on_noise_stays_within_the_budget",
    "tests/learning/test_gates_v4.py::test_a_proposal_the_store_did_not_record_spends_by_the_version_3_rule",
    "tests/learning/test_gates_v4.py::test_noise_is_confirmed_at_most_at_the_level_of_its_proposal",
    "tests/learning/test_gates_v4.py::test_the_store_numbers_a_partitions_proposals_and_profiles_re_derive_the_number",
    "tests/learning/test_holdout_looks.py::test_a_holdout_evaluated_outside_the_store_cannot_make_a_profile",
    "tests/learning/test_holdout_looks.py::test_a_profile_needs_the_store_s_record_of_its_holdout_look",
    "tests/learning/test_learning_offline.py::test_shuffled_labels_pass_the_screen_at_most_at_its_level_and_the_version_2_gate_at_most_five_percent",
    "tests/learning/test_metrics.py::test_ndcg_recall_and_mrr_agree_with_ranx_on_random_runs",
    "tests/profiles/test_profiles.py::test_concurrent_activations_from_one_baseline_let_exactly_one_win_on_postgres",
    "tests/receipts/test_replay_property.py::test_every_new_receipt_replays_and_unity_equals_baseline",
    "tests/retrieval/test_corpus_freshness.py::test_a_bounded_stress_run_misses_no_committed_memory",
}
"""Single slow tests elsewhere (node ids without the parameter part): those whose call took 2.5 s
or more on a quiet run of the fast tier with PostgreSQL (``--durations``), except the two
end-to-end loops the fast tier keeps (the Dagster pipeline to an applied profile, and the same
loop from Python), and one that starts processes."""


def tier_of(item: pytest.Item) -> str:
    path = item.nodeid.split("::", 1)[0]
    name = getattr(item, "originalname", item.name)
    if path in SERVER_FILES or any(fragment in name for fragment in SERVER_TESTS):
        return "server"
    if path.startswith("tests/assets/"):
        return "dagster"
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(v in ("duckdb", "postgres") for v in callspec.params.values()):
        return "contract"
    return "unit"


def assign(items: list[pytest.Item]) -> None:
    for item in items:
        own = [m.name for m in item.iter_markers() if m.name in TIERS]
        if not own:
            item.add_marker(getattr(pytest.mark, tier_of(item)))
        path = item.nodeid.split("::", 1)[0]
        base = item.nodeid.split("[", 1)[0]
        if path in SLOW_FILES or base in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
