"""Agent-loop benchmark: feedback born where it is in a deployment — an agent answering over MCP.

Run: ``python -m benchmarks.agent_loop [--data PATH] [--owners conv-26,...] [--tenant]
[--nights 10] [--store postgresql://…] [--out DIR | --update-results]`` (PostgreSQL: the server
and the learning runs use the store at once).

Per owner (a LoCoMo conversation, or every conversation as one tenant-sized owner) and agent:
a fresh PostgreSQL schema and Dagster instance; an operator stores the conversation and registers
its holdout questions with their complete evidence; ``prme serve`` runs in its own process; a
scripted agent with an agent key connects through the official MCP client over streamable HTTP
and, question by question over the feedback questions (split into nights in question order),
calls ``memory_search``, "uses" the evidence turns it finds — each returned evidence turn with
probability ``recall``, plus enough other returned turns that a share ``precision`` of what it
uses is evidence — and calls ``memory_judge`` with what it used. After each night the learning
job runs for the partition through Dagster (the assets and gates in process) and the activation
job when the activation sensor's logic asks for it, as the nightly schedule would.

Agents: ``exact`` (precision 1.0, recall 1.0), ``noisy`` (0.8, 0.7) and ``null`` (uses each
shown result with probability 1/20, whatever it says: random judgments). Reported per owner and
agent: judged questions until the first activation (or never), and holdout NDCG@10 of the
baseline and the activated profile (from the activation's holdout report).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from benchmarks.common import DEFAULT_PG
from benchmarks.locomo_learning import (
    _resources,
    _stored_artifact,
    add_policy_option,
    learn_partition,
    overrides_text,
    run_policy,
    store_url_for,
    temporary_instance,
)
from benchmarks.locomo_nightly import split_nights
from benchmarks.locomo_report import policy_changes
from prme_assets.cli import run_guarded
from prme_assets.demo.data import find_locomo_data
from prme_assets.interrupts import StopSignals
from prme_assets.partitions import encode_target
from prme_assets.resources import LearningPolicyResource
from prme_core.datasets.locomo import (
    LOCOMO_SCOPE,
    Conversation,
    conversation_clock,
    load_conversation,
    read_locomo,
    register_holdout,
    select,
    split_questions,
    tenant_conversation,
)
from prme_core.engine import MemoryClient

RESULTS = Path(__file__).parent / "results" / "agent-loop"
SCRATCH = Path(".prme/benchmarks/agent-loop")
LIMIT = 20
NULL_USE = 1 / 20


@dataclass(frozen=True)
class Agent:
    name: str
    precision: float | None  # None: the null agent (random judgments)
    recall: float | None

    def used(self, results: list[str], evidence: set[str], rng: random.Random) -> list[str]:
        if self.precision is None or self.recall is None:
            return [r for r in results if rng.random() < NULL_USE]
        found = [r for r in results if r in evidence and rng.random() < self.recall]
        others = [r for r in results if r not in evidence]
        extra = round(len(found) * (1 - self.precision) / self.precision) if found else 0
        return found + rng.sample(others, min(extra, len(others)))


AGENTS = {
    "exact": Agent("exact", 1.0, 1.0),
    "noisy": Agent("noisy", 0.8, 0.7),
    "null": Agent("null", None, None),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``prme serve`` in its own process on a free port, stopped on exit."""

    def __init__(self, store_url: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PRME_STORE_URL": store_url}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "prme_assets.cli", "serve", "--port", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def __enter__(self) -> Server:
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prme serve exited: {self.process.stderr.read().decode()[-400:]}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("prme serve did not answer within 60 s")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


async def answer_questions(
    url: str, key: str, conv: Conversation, questions: Any, agent: Agent, rng: random.Random
) -> dict[str, int]:
    """One night of the agent over MCP: search, use, judge, for each question."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    clock = conversation_clock(conv).isoformat()
    counts = {"questions": 0, "judged": 0, "usable": 0, "used": 0}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for question in questions:
                    found = await session.call_tool(
                        "memory_search", {"query": question.question, "limit": LIMIT, "reference_time": clock}
                    )
                    if found.is_error:
                        raise RuntimeError(f"memory_search failed: {found.structured_content}")
                    results = [r["node_id"] for r in found.structured_content["results"]]
                    evidence = {str(n) for n in conv.resolve(question)[0]}
                    used = agent.used(results, evidence, rng)
                    judged = await session.call_tool(
                        "memory_judge", {"request_id": found.structured_content["request_id"], "used": used}
                    )
                    if judged.is_error:
                        raise RuntimeError(f"memory_judge failed: {judged.structured_content}")
                    counts["questions"] += 1
                    counts["judged"] += 1
                    counts["used"] += len(used)
                    counts["usable"] += bool(judged.structured_content["usable_for_learning"])
    return counts


def run_season(
    conv: Conversation,
    agent: Agent,
    *,
    nights: int,
    store: str,
    seed: int,
    stop: StopSignals,
    say: Any,
    policy: LearningPolicyResource | None = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    split = split_questions(conv)
    owner, scopes = conv.sample_id, [LOCOMO_SCOPE]
    partition = encode_target(owner, scopes)
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    with store_url_for(store) as (url, _), temporary_instance() as instance, stop.runs_on(instance):
        resources = _resources(url, "hashed", policy)
        with MemoryClient(url) as client:
            load_conversation(client, conv)
            register_holdout(client, conv, split.holdout, limit=LIMIT)  # the operator's act
            # an agent key for the conversation's scope: its searches (every scope the key may read) and
            # so its feedback fall in the partition the learning job runs for
            key = client.create_api_key(owner, scopes=scopes).api_key
        asked = 0
        with Server(url) as server:
            for number, questions in enumerate(split_nights(split.feedback, nights), 1):
                counts = anyio.run(answer_questions, server.url, key, conv, questions, agent, rng)
                asked += counts["questions"]
                learned = learn_partition(instance, partition, resources, stop)
                outcome = _stored_artifact(url, owner, "full_retrieval_holdout", partition, learned.result.run_id)
                evaluation = None if outcome is None else outcome.evaluation
                row = {
                    "night": number,
                    "judged_so_far": asked,
                    **counts,
                    "stopped_by": learned.stopped_by,
                    "activated": learned.activation["activated"],
                    "holdout_baseline_ndcg": None if evaluation is None else evaluation.baseline_ndcg,
                    "holdout_candidate_ndcg": None if evaluation is None else evaluation.candidate_ndcg,
                    "holdout_decision": None if evaluation is None else evaluation.decision,
                }
                rows.append(row)
                say(
                    f"{owner} {agent.name} night {number}/{nights}: {asked} judged ({counts['usable']} usable), "
                    f"stopped by {learned.stopped_by or 'nothing'}, activated {row['activated']}"
                )
    first = next((r for r in rows if r["activated"]), None)
    return {
        "owner": owner,
        "agent": agent.name,
        "precision": agent.precision,
        "recall": agent.recall,
        "feedback_questions": len(split.feedback),
        "holdout_questions": len(split.holdout),
        "nights": rows,
        "questions_until_activation": None if first is None else first["judged_so_far"],
        "holdout_ndcg_before": None if first is None else first["holdout_baseline_ndcg"],
        "holdout_ndcg_after": None if first is None else first["holdout_candidate_ndcg"],
        "seconds": time.perf_counter() - started,
    }


def _policy_sentence(meta: dict[str, Any]) -> str:
    """The run's policy against today's defaults where the run recorded it whole; a run recorded
    before that names its ``--policy`` overrides of the defaults of its day."""
    changes = policy_changes(meta["policy"]) if "policy" in meta else meta.get("policy_overrides") or {}
    if not changes:
        return "The learning policy is the default."
    return f"The learning policy is the default but {overrides_text(changes)}."


def markdown(seasons: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Agent-loop benchmark",
        "",
        f"Generated by `{meta.get('command', 'python -m benchmarks.agent_loop --update-results')}` "
        f"({meta['seconds'] / 60:.0f} min). A "
        "scripted agent answers the LoCoMo development feedback questions through `prme serve` and the official "
        "MCP client (streamable HTTP): `memory_search`, then `memory_judge` with the evidence turns it used; the "
        f"learning job runs through Dagster after each of {meta['nights']} nights. Agents run: "
        + ", ".join(AGENT_TEXT[a] for a in meta.get("agents", AGENT_TEXT))
        + ". "
        + _policy_sentence(meta),
        "",
        "| owner | agent | feedback questions | usable judgments | judged until the first activation | holdout NDCG@10 "
        "before → after |",
        "|---|---|---|---|---|---|",
    ]
    for s in seasons:
        usable = sum(r["usable"] for r in s["nights"])
        until = s["questions_until_activation"]
        before, after = s["holdout_ndcg_before"], s["holdout_ndcg_after"]
        lines.append(
            f"| {s['owner']} | {s['agent']} | {s['feedback_questions']} | {usable} | "
            f"{'never' if until is None else until} | "
            f"{'—' if before is None else f'{before:.3f} → {after:.3f} ({after - before:+.3f})'} |"
        )
    nulls = [s for s in seasons if s["agent"] == "null"]
    lines += [
        "",
        f"Null agent: {sum(s['questions_until_activation'] is not None for s in nulls)} activations in "
        f"{len(nulls)} owner-seasons.",
        "",
    ]
    return "\n".join(lines)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("--data", help="a LoCoMo-format JSON file (default: the development file)")
    p.add_argument("--owners", help="comma-separated sample ids (default: every conversation)")
    p.add_argument("--tenant", action="store_true", help="also every conversation as one tenant-sized owner")
    p.add_argument("--agents", default="exact,noisy,null", help="agents to run (exact, noisy, null)")
    p.add_argument("--nights", type=int, default=10, help="nights per season (default 10)")
    p.add_argument("--store", default=os.environ.get("PRME_TEST_POSTGRES_DSN", DEFAULT_PG), help="a postgresql:// URL")
    p.add_argument("--seed", type=int, default=7)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--out", type=Path, default=None)
    group.add_argument("--update-results", action="store_true")
    add_policy_option(p)
    return p


AGENT_TEXT = {
    "exact": "exact (precision 1.0, recall 1.0)",
    "noisy": "noisy (0.8, 0.7)",
    "null": "null (random judgments)",
}


def run(options: argparse.Namespace, stop: StopSignals) -> dict[str, Any]:
    started = time.perf_counter()
    overrides, policy = run_policy(options)  # checked before any season runs
    conversations = read_locomo(find_locomo_data(options.data))
    owners = select(conversations, options.owners.split(",") if options.owners else None)
    if options.tenant:
        owners = [*owners, tenant_conversation(conversations)]
    seasons = []
    for conv in owners:
        for name in options.agents.split(","):
            seasons.append(
                run_season(
                    conv,
                    AGENTS[name],
                    nights=options.nights,
                    store=options.store,
                    seed=options.seed,
                    stop=stop,
                    say=print,
                    policy=policy,
                )
            )
    meta = {
        "seconds": time.perf_counter() - started,
        "nights": options.nights,
        "limit": LIMIT,
        "agents": options.agents.split(","),
        "policy_overrides": overrides,
        "policy": policy.model_dump(mode="json"),
        "command": " ".join(["python -m benchmarks.agent_loop", *getattr(options, "argv", [])]),
    }
    out = RESULTS if options.update_results else (options.out or SCRATCH)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, "seasons": seasons}, indent=1, sort_keys=True))
    text = markdown(seasons, meta)
    (out / "results.md").write_text(text)
    print(text)
    return {"meta": meta, "seasons": seasons}


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    options = build_parser(prog).parse_args(argv)
    options.argv = list(sys.argv[1:] if argv is None else argv)
    return run_guarded(
        lambda stop: (run(options, stop), 0)[1], prog=prog or "agent_loop", stopped="no results were written"
    )


if __name__ == "__main__":
    raise SystemExit(main())
