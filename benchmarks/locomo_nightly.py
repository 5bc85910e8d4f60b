"""Nightly-replay benchmark: scheduled learning is a sequence of looks.

Run: ``python -m benchmarks.locomo_nightly [--data PATH] [--nights 10] [--seeds 10]
[--owners conv-26,conv-30] [--tenant] [--limit 20] [--policy FIELD=VALUE …]
[--out DIR | --update-results] [--resume | --rewrite]``. Results go
to a scratch folder (``.prme/benchmarks/locomo-nightly/`` under the working directory) unless
``--out`` names one; only ``--update-results`` overwrites ``benchmarks/results/locomo-nightly/``
(``benchmarks/results/locomo-nightly-tenant/`` with ``--tenant``).

One *owner-season* per owner and label mode, each on a fresh DuckDB store and a fresh local
Dagster instance: store the conversation, register its holdout questions once (night 0), split
its feedback questions in question order into ``--nights`` contiguous nights. Each night records
that night's feedback (real retrievals, served by whatever profile is active, then
structured-evaluation labels, exactly as ``benchmarks.locomo_learning``), then runs the learning
job for the partition through Dagster (``LEARNING_ASSETS`` + ``GATES`` in process) and the
activation job when the activation sensor's logic asks for it.

``--tenant`` replays one tenant-sized owner instead: every conversation (of ``--owners``, or all)
stored under one owner and scope, as ``benchmarks.locomo_learning --tenant`` does for one look.

Real labels give each owner's first activation night (or never). The null control replays the
same season with the labels of every feedback record shuffled within its request at recording
time (PCG64 seeded by (seed, feedback position)), and counts every look, acceptance and
activation over all nights, owners and seeds. The holdout is the same registered holdout every
night: that reuse is what the benchmark measures.

Completed owner-seasons are appended to ``seasons.jsonl`` in the scratch folder as they finish;
``--resume`` reuses those whose inputs match (same data, owner, seed, nights, limit, policy).

``--policy FIELD=VALUE`` (repeatable) overrides a field of the default learning policy
(``LearningPolicyResource``) for a run of one's own, e.g. a test's smaller coverage minimums; the
report names the overrides. The committed results are the default policy's: ``--update-results``
refuses overrides.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import add_output_options
from benchmarks.locomo_learning import (
    _resources,
    _stored_artifact,
    add_policy_option,
    choose_embedding,
    embedder_named,
    learn_partition,
    overrides_text,
    run_policy,
    store_url_for,
    temporary_instance,
)
from benchmarks.locomo_null import shuffled_labels
from benchmarks.locomo_report import GATE_NAMES, PASSED_HOLDOUT, PASSED_OFFLINE, policy_changes
from prme_assets.cli import run_guarded
from prme_assets.demo.data import find_locomo_data
from prme_assets.interrupts import StopSignals
from prme_assets.partitions import encode_target
from prme_assets.resources import LearningPolicyResource
from prme_core.canonical import canonical_digest
from prme_core.datasets.locomo import (
    LOCOMO_SCOPE,
    Conversation,
    Question,
    load_conversation,
    read_locomo,
    record_feedback,
    register_holdout,
    split_questions,
    tenant_conversation,
)
from prme_core.engine import MemoryClient
from prme_core.errors import InvalidInput

SCRATCH_OUT = Path(".prme", "benchmarks", "locomo-nightly")
COMMITTED_OUT = Path(__file__).resolve().parent / "results" / "locomo-nightly"
TENANT_OUT = Path(__file__).resolve().parent / "results" / "locomo-nightly-tenant"
SEASONS_FILE = "seasons.jsonl"
DEFAULT_NIGHTS = 10
DEFAULT_SEEDS = 10
DEFAULT_LIMIT = 20
TARGET_RATE = 0.05
"""The null control's bounds: offline acceptances per look and owner-seasons with any activation."""
REPORT_VERSION = 1


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="a LoCoMo-format JSON file (default: the development file)")
    parser.add_argument(
        "--nights", type=int, default=DEFAULT_NIGHTS, help=f"nights per season (default {DEFAULT_NIGHTS})"
    )
    parser.add_argument(
        "--seeds", type=int, default=DEFAULT_SEEDS, help=f"null-control seeds per owner (default {DEFAULT_SEEDS})"
    )
    parser.add_argument("--owners", default=None, help="comma-separated sample ids (default: every conversation)")
    parser.add_argument(
        "--tenant",
        action="store_true",
        help="one tenant-sized owner: every conversation (of --owners, or all) under one owner and scope; "
        f"committed results in benchmarks/results/{TENANT_OUT.name}",
    )
    parser.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, help=f"results per retrieval (default {DEFAULT_LIMIT})"
    )
    parser.add_argument("--no-real", action="store_true", help="skip the real-label seasons (null control only)")
    add_policy_option(parser)
    add_output_options(
        parser, scratch=SCRATCH_OUT, committed=f"benchmarks/results/{COMMITTED_OUT.name} (or {TENANT_OUT.name})"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help=f"reuse matching owner-seasons from {SEASONS_FILE} in --out (default {SCRATCH_OUT})",
    )
    parser.add_argument(
        "--rewrite",
        action="store_true",
        help="recompute the summaries and rewrite results.json/results.md in the output folder from the "
        "seasons it already holds (no runs)",
    )
    return parser


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def split_nights(questions: tuple[Question, ...], nights: int) -> list[tuple[Question, ...]]:
    """``questions`` in their order, cut into ``nights`` contiguous parts whose sizes differ by at
    most one (the earlier nights take the remainder)."""
    size, extra = divmod(len(questions), nights)
    parts, start = [], 0
    for night in range(nights):
        end = start + size + (1 if night < extra else 0)
        parts.append(tuple(questions[start:end]))
        start = end
    return parts


def _gain(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


def _interval(pair: Any) -> str:
    return "" if not pair else f" [{pair[0]:+.3f}, {pair[1]:+.3f}]"


# --- one night ----------------------------------------------------------------------------------


def _offline(proposal: Any, mark: str) -> dict[str, Any]:
    if proposal is None or mark == "not reached":
        return {"reached": False, "decision": None, "gain": None, "interval": None, "accepted": False, "evidence": None}
    evidence = None
    if proposal.evidence_groups is not None:  # version 3: what the gate decided on
        evidence = {
            "groups": proposal.evidence_groups,
            "gain": proposal.evidence_ndcg_gain,
            "sign_flip_p": proposal.evidence_sign_flip_p,
        }
    return {
        "reached": True,
        "decision": proposal.decision,
        "gain": proposal.validation_ndcg_gain,
        "interval": None if proposal.validation_gain_interval is None else list(proposal.validation_gain_interval),
        "accepted": mark == "pass",
        "evidence": evidence,
    }


def _evidence(e: dict[str, Any] | None) -> str:
    """The offline gate's evidence as a table cell's words ("" for a night recorded without it)."""
    if not e:
        return ""
    return f" — evidence {e['groups']} groups {_gain(e['gain'])}, p {e['sign_flip_p']:.4f}; proposal"


def _holdout(outcome: Any, mark: str) -> dict[str, Any]:
    empty = {
        "reached": False,
        "status": None,
        "decision": None,
        "gain": None,
        "interval": None,
        "harm": None,
        "severe_share": None,
        "recall_gain": None,
        "baseline_ndcg": None,
        "candidate_ndcg": None,
        "query_groups": None,
        "baseline_profile_id": None,
        "accepted": False,
    }
    if outcome is None or mark == "not reached":
        return empty
    e = outcome.evaluation
    row = {
        **empty,
        "reached": True,
        "status": outcome.status,
        "baseline_profile_id": None if outcome.baseline_profile_id is None else str(outcome.baseline_profile_id),
        "accepted": mark == "pass",
    }
    if e is not None:
        row.update(
            decision=e.decision,
            gain=e.ndcg_gain,
            interval=None if e.ndcg_gain_interval is None else list(e.ndcg_gain_interval),
            harm=e.harm,
            severe_share=e.severe_share,
            recall_gain=e.recall_gain,
            baseline_ndcg=e.baseline_ndcg,
            candidate_ndcg=e.candidate_ndcg,
            query_groups=e.coverage.query_groups,
        )
    return row


def night_decision(night: dict[str, Any]) -> str:
    """One word-ish summary of what the night decided."""
    if night["activation"]["activated"]:
        return "activated"
    if night["stopped_by"] is not None:
        return f"stopped: {night['stopped_by']}"
    return f"not activated: {night['activation']['reason']}"


def run_night(
    conv: Conversation,
    questions: tuple[Question, ...],
    *,
    number: int,
    store_url: str,
    resources: dict[str, Any],
    instance: Any,
    relabel: Any,
    limit: int,
    stop: StopSignals,
) -> dict[str, Any]:
    started = time.perf_counter()
    owner, scopes = conv.sample_id, [LOCOMO_SCOPE]
    embedder = embedder_named(resources["prme_store"].embedding)
    with MemoryClient(store_url, embedder=embedder) as client:
        feedback = record_feedback(client, conv, questions, limit=limit, relabel=relabel)
    partition = encode_target(owner, scopes)
    learned = learn_partition(instance, partition, resources, stop)
    run_id = learned.result.run_id

    def artifact(asset: str) -> Any:
        return _stored_artifact(store_url, owner, asset, partition, run_id)

    split = artifact("query_split")
    if split is None:
        raise RuntimeError(f"{owner} night {number}: no query_split from Dagster run {run_id}")
    with MemoryClient(store_url, embedder=embedder) as client:
        active = client.get_active_ranking_profile(owner, scopes)
    night = {
        "night": number,
        "questions": len(questions),
        "recorded": feedback["recorded"],
        "without_returned_evidence": feedback["without_returned_evidence"],
        "feedback_records": split.coverage.feedback_records,
        "training_groups": split.coverage.training_queries,
        "validation_groups": split.coverage.validation_queries,
        "offline": _offline(artifact("ranking_proposal"), learned.checks["offline_gate_passed"]),
        "holdout": _holdout(artifact("full_retrieval_holdout"), learned.checks["holdout_gate_passed"]),
        "checks": dict(learned.checks),
        "stopped_by": learned.stopped_by,
        "activation": dict(learned.activation),
        "active_profile_after": None if active is None else str(active.profile_id),
        "dagster_run_success": learned.result.success,
        "seconds": time.perf_counter() - started,
    }
    night["decision"] = night_decision(night)
    return night


# --- one owner-season ---------------------------------------------------------------------------


def season_key(
    *,
    data_sha256: str,
    owner: str,
    seed: int | None,
    nights: int,
    limit: int,
    embedding: str,
    policy: LearningPolicyResource,
    members: list[str] | None = None,
) -> str:
    """What a season's outcome depends on (for ``--resume``): data, owner, labels, schedule, policy
    and, for a tenant of chosen conversations, which (``members``; None: the owner alone, or a
    tenant of every conversation in the data)."""
    fields = {
        "benchmark": "prme:locomo-nightly:v1",
        "data_sha256": data_sha256,
        "owner": owner,
        "seed": seed,
        "nights": nights,
        "limit": limit,
        "embedding": embedding,
        "policy": policy.model_dump(mode="json"),
    }
    if members is not None:  # absent otherwise: the keys of per-owner seasons stay what they were
        fields["members"] = list(members)  # in the order the tenant combines them
    return canonical_digest(fields)


def run_season(
    conv: Conversation,
    *,
    seed: int | None,
    nights: int,
    limit: int,
    embedding: str,
    stop: StopSignals,
    policy: LearningPolicyResource,
    progress: Any = _say,
    label: str = "",
) -> dict[str, Any]:
    """One owner's season: real labels (``seed`` None) or labels shuffled with ``seed``, learning
    under ``policy``."""
    started = time.perf_counter()
    split = split_questions(conv)
    position = {q.index: i for i, q in enumerate(split.feedback)}
    relabel = None if seed is None else (lambda q, labels: shuffled_labels(labels, seed, position[q.index]))
    parts = split_nights(split.feedback, nights)
    rows = []
    with (
        store_url_for("duckdb") as (store_url, _),
        temporary_instance() as instance,
        stop.runs_on(instance),
    ):
        resources = _resources(store_url, embedding, policy)
        with MemoryClient(store_url, embedder=embedder_named(embedding)) as client:
            load_conversation(client, conv)
            registered = register_holdout(client, conv, split.holdout, limit=limit)
        for number, questions in enumerate(parts, 1):
            night = run_night(
                conv,
                questions,
                number=number,
                store_url=store_url,
                resources=resources,
                instance=instance,
                relabel=relabel,
                limit=limit,
                stop=stop,
            )
            rows.append(night)
            o, h = night["offline"], night["holdout"]
            progress(
                f"{label}{conv.sample_id} {'real' if seed is None else f'null seed {seed}'} night {number}/{nights}: "
                f"+{night['questions']} q, train/val {night['training_groups']}/{night['validation_groups']}, "
                f"offline {o['decision'] or 'not reached'} {_gain(o['gain'])}{_interval(o['interval'])}, "
                f"holdout {h['decision'] or 'not reached'} {_gain(h['gain'])}, {night['decision']}; "
                f"{night['seconds']:.1f} s (season {time.perf_counter() - started:.0f} s)"
            )
    activated = [n["night"] for n in rows if n["activation"]["activated"]]
    return {
        "owner": conv.sample_id,
        "seed": seed,
        "labels": "real" if seed is None else "shuffled",
        "feedback_questions": len(split.feedback),
        "holdout_questions": len(split.holdout),
        "holdout_registered": registered,
        "nights": rows,
        "first_activation_night": activated[0] if activated else None,
        "activation_nights": activated,
        "active_profile_id": rows[-1]["active_profile_after"] if rows else None,
        "seconds": time.perf_counter() - started,
    }


# --- summaries ----------------------------------------------------------------------------------


def owner_summary(season: dict[str, Any]) -> dict[str, Any]:
    """A real-label season in one row: when it first activated and what the active profile gained."""
    nights = season["nights"]
    act = [n for n in nights if n["activation"]["activated"]]
    last = nights[-1]
    row = {
        "owner": season["owner"],
        "feedback_questions": season["feedback_questions"],
        "holdout_questions": season["holdout_questions"],
        "looks": sum(n["offline"]["reached"] for n in nights),
        "offline_accepts": sum(n["offline"]["accepted"] for n in nights),
        "holdout_accepts": sum(n["holdout"]["accepted"] for n in nights),
        "activations": len(act),
        "first_activation_night": season["first_activation_night"],
        "active_profile_id": season["active_profile_id"],
        "active_holdout_gain": None,
        "active_holdout_interval": None,
        "base_holdout_ndcg": None,
        "active_holdout_ndcg": None,
        "last_offline_decision": last["offline"]["decision"],
        "last_offline_gain": last["offline"]["gain"],
        "last_offline_interval": last["offline"]["interval"],
        "last_offline_evidence": last["offline"].get("evidence"),
        "last_stopped_by": last["stopped_by"],
    }
    if act:
        first, final = act[0]["holdout"], act[-1]["holdout"]
        row.update(
            active_holdout_gain=final["gain"],
            active_holdout_interval=final["interval"],
            base_holdout_ndcg=first["baseline_ndcg"],
            active_holdout_ndcg=final["candidate_ndcg"],
        )
    return row


def null_summary(seasons: list[dict[str, Any]], nights: int) -> dict[str, Any]:
    """Every look, acceptance and activation over all nights, owners and seeds of the null, and
    how many owner-seasons had at least one offline acceptance / activation by each night."""
    per_night = []
    ever: dict[str, set[tuple[str, int]]] = {"offline": set(), "holdout": set(), "activation": set()}
    for number in range(1, nights + 1):
        rows = [(s, s["nights"][number - 1]) for s in seasons]
        for s, n in rows:
            for kind, hit in (
                ("offline", n["offline"]["accepted"]),
                ("holdout", n["holdout"]["accepted"]),
                ("activation", n["activation"]["activated"]),
            ):
                if hit:
                    ever[kind].add((s["owner"], s["seed"]))
        per_night.append(
            {
                "night": number,
                "seasons": len(rows),
                "looks": sum(n["offline"]["reached"] for _, n in rows),
                "offline_accepts": sum(n["offline"]["accepted"] for _, n in rows),
                "holdout_evaluations": sum(n["holdout"]["decision"] is not None for _, n in rows),
                "holdout_accepts": sum(n["holdout"]["accepted"] for _, n in rows),
                "activations": sum(n["activation"]["activated"] for _, n in rows),
                "cumulative_seasons_with_offline_accept": len(ever["offline"]),
                "cumulative_seasons_with_holdout_accept": len(ever["holdout"]),
                "cumulative_seasons_with_activation": len(ever["activation"]),
            }
        )
    per_owner = []
    for owner in sorted({s["owner"] for s in seasons}):
        mine = [s for s in seasons if s["owner"] == owner]
        flat = [n for s in mine for n in s["nights"]]
        per_owner.append(
            {
                "owner": owner,
                "seasons": len(mine),
                "looks": sum(n["offline"]["reached"] for n in flat),
                "offline_accepts": sum(n["offline"]["accepted"] for n in flat),
                "holdout_accepts": sum(n["holdout"]["accepted"] for n in flat),
                "activations": sum(n["activation"]["activated"] for n in flat),
                "seasons_with_offline_accept": sum(any(n["offline"]["accepted"] for n in s["nights"]) for s in mine),
                "seasons_with_activation": sum(bool(s["activation_nights"]) for s in mine),
            }
        )
    looks = sum(r["looks"] for r in per_night)
    offline = sum(r["offline_accepts"] for r in per_night)
    n_seasons = len(seasons)
    total = {
        "owner_seasons": n_seasons,
        "nights": n_seasons * nights,
        "looks": looks,
        "offline_accepts": offline,
        "offline_accept_rate": offline / looks if looks else 0.0,
        "holdout_evaluations": sum(r["holdout_evaluations"] for r in per_night),
        "holdout_accepts": sum(r["holdout_accepts"] for r in per_night),
        "activations": sum(r["activations"] for r in per_night),
        "seasons_with_offline_accept": len(ever["offline"]),
        "season_offline_accept_rate": len(ever["offline"]) / n_seasons if n_seasons else 0.0,
        "seasons_with_holdout_accept": len(ever["holdout"]),
        "seasons_with_activation": len(ever["activation"]),
        "season_activation_rate": len(ever["activation"]) / n_seasons if n_seasons else 0.0,
    }
    total["within_bounds"] = (
        total["offline_accept_rate"] <= TARGET_RATE and total["season_activation_rate"] <= TARGET_RATE
    )
    return {"total": total, "per_night": per_night, "per_owner": per_owner}


def check_report(report: dict[str, Any]) -> None:
    """Raise AssertionError unless the report is well formed and its counts add up."""
    nights = report["options"]["nights"]
    for season in [*report["real"], *report["null"]]:
        rows = season["nights"]
        assert [n["night"] for n in rows] == list(range(1, nights + 1)), season["owner"]
        assert sum(n["questions"] for n in rows) == season["feedback_questions"], season["owner"]
        for n in rows:
            assert set(n["checks"]) == set(GATE_NAMES), n["checks"]
            assert n["decision"], n
            assert n["offline"]["accepted"] == (n["checks"]["offline_gate_passed"] == "pass")
            assert not n["offline"]["accepted"] or n["offline"]["decision"] == PASSED_OFFLINE
            assert n["holdout"]["accepted"] == (n["checks"]["holdout_gate_passed"] == "pass")
            assert not n["holdout"]["accepted"] or n["holdout"]["decision"] == PASSED_HOLDOUT
            assert not n["holdout"]["reached"] or n["offline"]["accepted"], n
            if n["activation"]["activated"]:
                assert n["stopped_by"] is None and n["activation"]["profile_id"] == n["active_profile_after"]
        assert season["activation_nights"] == [n["night"] for n in rows if n["activation"]["activated"]]
    null = report["null_summary"]
    if null is None:
        assert not report["null"]
        return
    total, per_night = null["total"], null["per_night"]
    flat = [n for s in report["null"] for n in s["nights"]]
    assert total["owner_seasons"] == len(report["null"]) and total["nights"] == len(flat)
    for key in ("looks", "offline_accepts", "holdout_accepts", "activations"):
        assert total[key] == sum(r[key] for r in per_night) == sum(r[key] for r in null["per_owner"]), key
    assert total["looks"] == sum(n["offline"]["reached"] for n in flat)
    assert total["activations"] <= total["holdout_accepts"] <= total["holdout_evaluations"] <= total["offline_accepts"]
    for kind in ("offline_accept", "holdout_accept", "activation"):
        cumulative = [r[f"cumulative_seasons_with_{kind}"] for r in per_night]
        assert (
            cumulative == sorted(cumulative) and (cumulative[-1] if cumulative else 0) == total[f"seasons_with_{kind}"]
        ), kind
    for kind in ("offline_accept", "activation"):
        assert total[f"seasons_with_{kind}"] == sum(r[f"seasons_with_{kind}"] for r in null["per_owner"]), kind
    assert total["seasons_with_activation"] <= total["seasons_with_holdout_accept"]
    assert total["seasons_with_holdout_accept"] <= total["seasons_with_offline_accept"] <= total["owner_seasons"]
    assert total["seasons_with_offline_accept"] <= total["offline_accepts"]


# --- report files -------------------------------------------------------------------------------


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _pct(part: int, whole: int) -> str:
    return f"{part} / {whole} ({part / whole:.1%})" if whole else f"{part} / 0"


def _policy_words(report: dict[str, Any]) -> str:
    """The run's learning policy against today's defaults (the recorded policy, so a report
    re-rendered after a default changed names what its run differs in)."""
    changes = policy_changes(report["policy"])
    if not changes:
        return "default learning policy"
    return "learning policy: the defaults but " + overrides_text(changes)


def _tenant_words(options: dict[str, Any]) -> str:
    if not options.get("tenant"):
        return ""
    picked = options.get("owners")
    return f" — tenant mode: {'conversations ' + ', '.join(picked) if picked else 'every conversation'} under one owner"


def markdown(report: dict[str, Any]) -> str:
    o = report["options"]
    lines = [
        "# LoCoMo nightly-replay benchmark",
        "",
        f"Generated {report['created_at']} by `python -m benchmarks.locomo_nightly` on {report['data']['name']} "
        f"(data sha256 `{report['data']['sha256'][:16]}…`; {_count(len(report['data']['owners']), 'owner')}: "
        f"{', '.join(report['data']['owners'])}{_tenant_words(o)}), embedding **{report['embedding']}**, "
        f"{o['nights']} nights per season, {o['seeds']} null seeds, limit {o['limit']}, {_policy_words(report)}. "
        f"{report['data']['source']} (read at run time, not copied here).",
        "",
        "Each owner-season: a fresh store and Dagster instance; the conversation stored and its holdout "
        "questions registered once; the feedback questions, in question order, arriving over the nights. "
        "After each night the learning job runs through Dagster (learning assets + every gate, in process) "
        "and the activation job runs when the activation sensor's logic requests it. The same registered "
        "holdout is re-used every night (after an activation its baseline is the active profile).",
        "",
    ]
    real = report["real_summary"]
    if real:
        lines += [
            "## Real labels: when each owner first activates",
            "",
            "| owner | feedback / holdout questions | looks | offline accepts | holdout accepts | activations "
            "| first activation night | active profile holdout NDCG gain [95% CI] | holdout NDCG base → active "
            "| last night: offline decision — the gate's evidence (groups, NDCG gain, sign-flip p); the "
            "proposal's validation gain [95% CI] | last night stopped by |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in real:
            first = "never" if r["first_activation_night"] is None else str(r["first_activation_night"])
            ndcg = (
                "—"
                if r["base_holdout_ndcg"] is None
                else f"{r['base_holdout_ndcg']:.3f} → {r['active_holdout_ndcg']:.3f}"
            )
            lines.append(
                f"| {r['owner']} | {r['feedback_questions']} / {r['holdout_questions']} | {r['looks']} "
                f"| {r['offline_accepts']} | {r['holdout_accepts']} | {r['activations']} | {first} "
                f"| {_gain(r['active_holdout_gain'])}{_interval(r['active_holdout_interval'])} | {ndcg} "
                f"| {r['last_offline_decision'] or 'not reached'}{_evidence(r.get('last_offline_evidence'))} "
                f"{_gain(r['last_offline_gain'])}"
                f"{_interval(r['last_offline_interval'])} | {r['last_stopped_by'] or '— (all passed)'} |"
            )
        lines += ["", "### Real labels night by night", ""]
        lines += _night_table(report["real"])
    null = report["null_summary"]
    if null:
        t = null["total"]
        verdict = "within bounds" if t["within_bounds"] else "**outside bounds** (the decision rule needs attention)"
        lines += [
            "",
            "## Null control: labels shuffled within each request, every look counted",
            "",
            f"{t['owner_seasons']} owner-seasons ({len(null['per_owner'])} owners × {o['seeds']} seeds), "
            f"{t['nights']} learning runs. Labels are shuffled at recording time (PCG64 seeded by "
            "(seed, feedback position)), so later retrievals are served by whatever a shuffled-label "
            "season activated. Targets: offline acceptance ≤ 5% of looks, owner-seasons with any "
            f"activation ≤ 5%: {verdict}.",
            "",
            "| looks (offline gate reached) | offline accepts | holdout evaluations | holdout accepts "
            "| activations | owner-seasons with any offline accept | owner-seasons with any activation |",
            "|---|---|---|---|---|---|---|",
            f"| {t['looks']} of {t['nights']} runs | {_pct(t['offline_accepts'], t['looks'])} "
            f"| {t['holdout_evaluations']} | {t['holdout_accepts']} | {t['activations']} "
            f"| {_pct(t['seasons_with_offline_accept'], t['owner_seasons'])} "
            f"| {_pct(t['seasons_with_activation'], t['owner_seasons'])} |",
            "",
            "A season's looks share one registered holdout: an owner-season with any offline acceptance is one "
            "in which noise reached the holdout gate at least once; only the holdout stood between it and "
            "an activation.",
            "",
            "### Null control per night",
            "",
            "| night | looks | offline accepts | holdout accepts | activations | cumulative owner-seasons with "
            "any offline accept | cumulative owner-seasons with any activation |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in null["per_night"]:
            lines.append(
                f"| {r['night']} | {r['looks']} of {r['seasons']} | {r['offline_accepts']} | {r['holdout_accepts']} "
                f"| {r['activations']} | {r['cumulative_seasons_with_offline_accept']} "
                f"| {r['cumulative_seasons_with_activation']} |"
            )
        lines += [
            "",
            "### Null control per owner",
            "",
            "| owner | seasons | looks | offline accepts | holdout accepts | activations | seasons with any offline "
            "accept | seasons with any activation |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in null["per_owner"]:
            lines.append(
                f"| {r['owner']} | {r['seasons']} | {r['looks']} | {_pct(r['offline_accepts'], r['looks'])} "
                f"| {r['holdout_accepts']} | {r['activations']} | {r['seasons_with_offline_accept']} "
                f"| {r['seasons_with_activation']} |"
            )
        accepted = [(s, n) for s in report["null"] for n in s["nights"] if n["offline"]["accepted"]]
        if accepted:
            lines += ["", "Null looks the offline gate accepted:", ""]
            lines += [
                "| owner | seed | night | validation groups | offline gain [95% CI] | holdout decision | holdout gain [95% CI] | activated |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for s, n in accepted:
                lines.append(
                    f"| {s['owner']} | {s['seed']} | {n['night']} | {n['validation_groups']} "
                    f"| {_gain(n['offline']['gain'])}{_interval(n['offline']['interval'])} "
                    f"| {n['holdout']['decision'] or n['holdout']['status'] or '—'} "
                    f"| {_gain(n['holdout']['gain'])}{_interval(n['holdout']['interval'])} "
                    f"| {'yes' if n['activation']['activated'] else 'no'} |"
                )
    runs = [n for s in [*report["real"], *report["null"]] for n in s["nights"]]
    m = report["machine"]
    lines += [
        "",
        "## Run",
        "",
        f"Total wall time {_clock(report['seconds_total'])} ({report['seconds_total']:.0f} s) for "
        f"{len(report['real']) + len(report['null'])} owner-seasons and {len(runs)} nights "
        f"(mean {sum(n['seconds'] for n in runs) / max(1, len(runs)):.1f} s a night: feedback retrievals, the "
        f"Dagster learning run, the activation job when requested), on {m['cpus']} CPUs; load average "
        f"{m['load_before']} at the start, {m['load_after']} at the end"
        + (
            f"; {report['resumed_seasons']} owner-seasons reused from an earlier run (--resume)"
            if report["resumed_seasons"]
            else ""
        )
        + ".",
        "",
        "Limitations: the development conversations only; feedback is simulated from LoCoMo's evidence ids "
        "(structured evaluation); the holdout judges retrieval, not answers; gate thresholds are the defaults, "
        "untouched here. A null 'activation' is one a shuffled-label season would have served: the holdout it "
        "passed is the real one, so it measures how often repeated looks let noise through both gates.",
        "",
    ]
    return "\n".join(lines)


def _night_table(seasons: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| owner | night | +questions | train / val groups | offline decision — the gate's evidence (groups, NDCG "
        "gain, sign-flip p); the proposal's validation gain [95% CI] | holdout decision, "
        "gain [95% CI] | harm | severe share | stopped by | activated | active after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in seasons:
        for n in s["nights"]:
            o, h = n["offline"], n["holdout"]
            lines.append(
                f"| {s['owner']} | {n['night']} | {n['questions']} | {n['training_groups']} / {n['validation_groups']} "
                f"| {o['decision'] or 'not reached'}{_evidence(o.get('evidence'))} {_gain(o['gain'])}{_interval(o['interval'])} "
                f"| {h['decision'] or h['status'] or 'not reached'} {_gain(h['gain'])}{_interval(h['interval'])} "
                f"| {_gain(h['harm']).lstrip('+')} | {_gain(h['severe_share']).lstrip('+')} "
                f"| {n['stopped_by'] or '—'} | {'yes' if n['activation']['activated'] else 'no'} "
                f"| {'profile' if n['active_profile_after'] else 'base'} |"
            )
    return lines


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with its real-label and null summaries (re)computed from its seasons."""
    return {
        **report,
        "real_summary": [owner_summary(s) for s in report["real"]],
        "null_summary": null_summary(report["null"], report["options"]["nights"]) if report["null"] else None,
    }


def report_json(report: dict[str, Any]) -> str:
    """Indented JSON with each night on one line (a season's nights stay readable and diffable)."""
    nights = {}

    def marked(season: dict[str, Any], i: int) -> dict[str, Any]:
        rows = []
        for j, night in enumerate(season["nights"]):
            key = f"@night:{i}:{j}"
            nights[json.dumps(key)] = json.dumps(night, sort_keys=True)
            rows.append(key)
        return {**season, "nights": rows}

    seasons = [*report["real"], *report["null"]]
    shell = {**report, "real": [], "null": []}
    shell["real"] = [marked(s, i) for i, s in enumerate(seasons[: len(report["real"])])]
    shell["null"] = [marked(s, len(report["real"]) + i) for i, s in enumerate(report["null"])]
    text = json.dumps(shell, indent=1, sort_keys=True)
    for key, line in nights.items():
        text = text.replace(key, line, 1)
    return text + "\n"


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    check_report(report)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "results.md"]
    text = report_json(report)
    assert json.loads(text) == json.loads(json.dumps(report)), "one-line nights changed the report"
    paths[0].write_text(text)
    paths[1].write_text(markdown(report))
    return paths


def rewrite(out: Path) -> dict[str, Any]:
    """Recompute the summaries of the ``results.json`` in ``out`` and rewrite both files (no runs;
    timings and load figures stay those of the run that produced the seasons)."""
    report = summarize(json.loads((out / "results.json").read_text()))
    paths = write_report(report, out)
    _say(f"rewrote {', '.join(str(p) for p in paths)} from their seasons")
    return report


# --- the whole run ------------------------------------------------------------------------------


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _resumable(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    found = {}
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            found[entry["key"]] = entry["season"]
    return found


def output_dir(options: argparse.Namespace) -> Path:
    """The committed results with ``--update-results`` (the tenant's with ``--tenant``), else
    ``--out``, else the scratch folder."""
    if options.update_results:
        return TENANT_OUT if getattr(options, "tenant", False) else COMMITTED_OUT
    return Path(options.out) if options.out else SCRATCH_OUT


def run(options: argparse.Namespace, stop: StopSignals | None = None) -> dict[str, Any]:
    """Run the benchmark and write its files; returns the report. Every input is checked first."""
    if stop is None:
        with StopSignals() as own:
            return run(options, own)
    if options.rewrite:
        return rewrite(output_dir(options))
    overrides, policy = run_policy(options)
    path = find_locomo_data(options.data)
    wanted = [s.strip() for s in options.owners.split(",") if s.strip()] if options.owners else None
    conversations = read_locomo(path, wanted)
    tenant = bool(getattr(options, "tenant", False))
    members = [c.sample_id for c in conversations] if tenant and wanted else None
    if tenant:
        conversations = [tenant_conversation(conversations)]
    if options.nights < 1:
        raise InvalidInput("--nights", f"must be ≥ 1, got {options.nights}")
    if options.seeds < 0:
        raise InvalidInput("--seeds", f"must be ≥ 0, got {options.seeds}")
    if not 1 <= options.limit <= 200:
        raise InvalidInput("--limit", f"must be in 1..200, got {options.limit}")
    started, load_before = time.perf_counter(), _load()
    embedding, _ = choose_embedding("hashed")
    data_sha = hashlib.sha256(path.read_bytes()).hexdigest()
    # real seasons for every owner first, then the null seed by seed, so a stopped run holds whole seeds
    plan = [] if options.no_real else [(conv, None) for conv in conversations]
    plan += [(conv, seed) for seed in range(options.seeds) for conv in conversations]
    scratch = Path(options.out) if options.out else SCRATCH_OUT  # never the committed folder
    scratch.mkdir(parents=True, exist_ok=True)
    partial = scratch / SEASONS_FILE
    done = _resumable(partial) if options.resume else {}
    if not options.resume:
        partial.write_text("")
    _say(
        f"LoCoMo nightly replay: {len(conversations)} owners from {path}, {options.nights} nights, "
        f"{options.seeds} null seeds: {len(plan)} owner-seasons, {len(plan) * options.nights} learning runs; "
        f"load {load_before}"
    )
    seasons, resumed = [], 0
    for i, (conv, seed) in enumerate(plan, 1):
        key = season_key(
            data_sha256=data_sha,
            owner=conv.sample_id,
            seed=seed,
            nights=options.nights,
            limit=options.limit,
            embedding=embedding,
            policy=policy,
            members=members,
        )
        if key in done:
            seasons.append(done[key])
            resumed += 1
            continue
        season = run_season(
            conv,
            seed=seed,
            nights=options.nights,
            limit=options.limit,
            embedding=embedding,
            stop=stop,
            label=f"[{i}/{len(plan)} {_clock(time.perf_counter() - started)}] ",
            policy=policy,
        )
        seasons.append(season)
        with partial.open("a") as f:
            f.write(json.dumps({"key": key, "season": season}, sort_keys=True) + "\n")
        first = season["first_activation_night"]
        _say(
            f"[{i}/{len(plan)} {_clock(time.perf_counter() - started)}] {conv.sample_id} "
            f"{season['labels']}{'' if seed is None else f' seed {seed}'} done in {season['seconds']:.0f} s: "
            f"first activation {'never' if first is None else f'night {first}'}; load {_load()}"
        )
    stop.raise_if_stopped()
    real = [s for s in seasons if s["seed"] is None]
    null = [s for s in seasons if s["seed"] is not None]
    report = {
        "version": REPORT_VERSION,
        "created_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "data": {
            "name": path.name,
            "sha256": data_sha,
            "owners": [c.sample_id for c in conversations],
            "source": "LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0",
        },
        "embedding": embedding,
        "options": {
            "nights": options.nights,
            "seeds": options.seeds,
            "limit": options.limit,
            "owners": wanted,
            "tenant": tenant,
            "policy_overrides": overrides,
        },
        "policy": policy.model_dump(mode="json"),
        "real": real,
        "null": null,
        "machine": {"cpus": os.cpu_count(), "load_before": load_before, "load_after": _load()},
        "resumed_seasons": resumed,
        "seconds_total": time.perf_counter() - started,
    }
    report = summarize(report)
    paths = write_report(report, output_dir(options))
    _say(f"wrote {', '.join(str(p) for p in paths)} in {_clock(report['seconds_total'])}; load {_load()}")
    return report


def main(argv: list[str] | None = None, prog: str | None = None, stop: StopSignals | None = None) -> int:
    run(build_parser(prog).parse_args(argv), stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(
        run_guarded(
            lambda stop: main(stop=stop),
            prog="python -m benchmarks.locomo_nightly",
            stopped="its runs were canceled; completed owner-seasons are in " + str(SCRATCH_OUT / SEASONS_FILE),
        )
    )
