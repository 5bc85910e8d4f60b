"""Engine-default tuning on LoCoMo: BM25 (k1, b) and the interaction-feature weights, chosen on
feedback questions only and confirmed once on the holdout questions.

Run: ``python -m benchmarks.locomo_tuning [--data PATH] [--conversations conv-26,conv-30]
[--embedding hashed|minilm] [--k1 0.3,0.5,…] [--b 0.1,0.2,…] [--confirm-only]
[--out DIR | --update-results]``. Any LoCoMo-format file works with ``--data``; results go to
``.prme/benchmarks/tuning/`` under the working directory unless ``--out`` names a folder, and only
``--update-results`` overwrites the committed ones: ``benchmarks/results/tuning/`` for the hashed
embedding, ``benchmarks/results/tuning-<embedding>/`` for another (``tuning.json``, ``tuning.md``;
``confirmation.json``, ``confirmation.md`` with ``--confirm-only``).

Method (declared before any run):

1. Every conversation is one owner; all its turns go into one temporary DuckDB store through the
   project's loader. Questions are split with ``split_questions`` (the hash split of the learning
   benchmark): the grids see only the *feedback* questions.
2. Each configuration is scored by base retrieval (no profile) of every feedback question:
   NDCG@10 and recall@10 of the returned list against the question's complete evidence set,
   averaged per query group, then pooled over all owners' groups.
3. Stage 1: every (k1, b) of the grid with the interaction weights at 0. Stage 2, at the chosen
   (k1, b): every combination of the interaction weights' grids (skipped when ``ScoringWeights``
   has no such fields).
4. Choice: the highest pooled feedback NDCG@10; among configurations within ``TIE_MARGIN`` of it,
   the simplest. Simplest means closest to the reference for BM25 (smallest
   |k1 − 1.5|/1.5 + |b − 0.75|/0.75), and fewest non-zero, then smallest summed weights, for the
   interaction weights.
5. Once, after both choices: the holdout questions under the reference (k1 1.5, b 0.75, weights
   0, the defaults before this tuning) and under the chosen configuration, per owner, per LoCoMo
   category and pooled, with paired bootstrap 95% intervals (the project's bootstrap, 2000
   resamples, seed 42). A category whose interval lies wholly below 0 is flagged. The holdout
   also shows the chosen BM25 alone, for attribution; no holdout figure chooses anything.
6. ``--confirm-only`` chooses nothing: it skips both grids and takes the engine's current defaults
   (``EngineSettings()``: its BM25 and interaction weights) as the chosen configuration, scores
   the reference and the defaults on the feedback questions, and confirms once on the holdout
   questions exactly as in step 5. It checks defaults chosen elsewhere (for example on the hashed
   embedding) under another embedding or on other data.

Every retrieval goes through ``MemoryClient.retrieve`` with the configuration as engine settings
(``EngineSettings.bm25``, ``scoring``), one client per configuration over the same store, so the
corpus index is rebuilt for each (k1, b) and every receipt records the parameters it ran under.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import add_output_options
from prme_core.canonical import canonical_json
from prme_core.datasets.locomo import (
    LOCOMO_SCOPE,
    Conversation,
    Question,
    conversation_clock,
    load_conversation,
    read_locomo,
    split_questions,
)
from prme_core.engine import MemoryClient
from prme_core.learning.bootstrap import BOOTSTRAP_ALGORITHM, bootstrap_interval
from prme_core.learning.metrics import ndcg_at_k, recall_at_k
from prme_core.learning.split import group_id
from prme_core.retrieval.bm25 import Bm25Parameters
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.embedding import embedding_provider
from prme_core.retrieval.text import normalize_query
from prme_core.settings import EngineSettings
from prme_core.storage import open_store

SCRATCH_OUT = Path(".prme", "benchmarks", "tuning")
COMMITTED_RESULTS = Path(__file__).resolve().parent / "results"
K = 10
LIMIT = 20
"""Results per retrieval, as in the learning benchmark's holdout (NDCG@10 reads the first 10)."""
K1_GRID = (0.3, 0.5, 0.7, 0.9, 1.2, 1.5)
B_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.75)
INTERACTION_GRID = {
    "term_coverage": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5),
    "entity_match": (0.0, 0.1, 0.2),
    "bigram_overlap": (0.0, 0.1, 0.2),
}
REFERENCE_BM25 = Bm25Parameters(k1=1.5, b=0.75)
"""The BM25 defaults before this tuning (the reference arm of the holdout comparison)."""
TIE_MARGIN = 0.002
BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED = 2000, 42
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Config:
    """One configuration: BM25 parameters and interaction weights (an unlisted weight keeps the engine's default;
    the benchmark lists every one)."""

    k1: float
    b: float
    weights: tuple[tuple[str, float], ...] = ()

    @property
    def bm25(self) -> Bm25Parameters:
        return Bm25Parameters(k1=self.k1, b=self.b)

    def label(self) -> str:
        extra = "".join(f", {name} {value:g}" for name, value in self.weights if value)
        return f"k1 {self.k1:g}, b {self.b:g}{extra}"

    def as_dict(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, **dict(self.weights)}


@dataclass(frozen=True)
class Owner:
    """One conversation (owner) and its feedback and holdout questions."""

    conversation: Conversation
    feedback: tuple[Question, ...]
    holdout: tuple[Question, ...]

    @property
    def name(self) -> str:
        return self.conversation.sample_id


def interaction_fields() -> tuple[str, ...]:
    """The interaction weights ``ScoringWeights`` has (none before the engine adds them)."""
    return tuple(name for name in INTERACTION_GRID if name in ScoringWeights.model_fields)


def scoring_for(config: Config, base: ScoringWeights) -> ScoringWeights:
    return ScoringWeights.model_validate({**base.model_dump(), **dict(config.weights)})


class Evaluator:
    """Scores configurations over one store that holds every owner's turns."""

    def __init__(self, store: Any, embedder: Any, owners: Sequence[Owner], base: EngineSettings) -> None:
        self.store, self.embedder, self.owners, self.base = store, embedder, owners, base
        self.retrievals = 0

    def client(self, config: Config) -> MemoryClient:
        settings = EngineSettings.model_validate(
            {
                **self.base.model_dump(),
                "bm25": config.bm25.model_dump(),
                "scoring": scoring_for(config, self.base.scoring).model_dump(),
            }
        )
        client = MemoryClient(settings=settings, store=self.store, embedder=self.embedder)
        recorded = client.pipeline.features["lexical"]
        if (recorded["k1"], recorded["b"]) != (config.k1, config.b):
            raise RuntimeError(
                f"the pipeline records k1 {recorded['k1']}, b {recorded['b']} instead of "
                f"{config.label()}: it does not read EngineSettings.bm25"
            )
        return client

    def per_group(self, config: Config, side: str) -> dict[tuple[str, str], tuple[float, float, int]]:
        """(owner, query group) → (NDCG@10, recall@10, category) of base retrieval under ``config``."""
        client = self.client(config)
        out: dict[tuple[str, str], list[tuple[float, float]]] = {}
        category: dict[tuple[str, str], int] = {}
        for owner in self.owners:
            conv = owner.conversation
            clock = conversation_clock(conv)
            for question in getattr(owner, side):
                relevant = set(conv.resolve(question)[0])
                response = client.retrieve(
                    question.question, owner=conv.sample_id, scopes=[LOCOMO_SCOPE], reference_time=clock, limit=LIMIT
                )
                self.retrievals += 1
                flags = [r.node_id in relevant for r in response.results]
                key = (conv.sample_id, group_id(normalize_query(question.question)))
                out.setdefault(key, []).append(
                    (ndcg_at_k(flags, len(relevant), K), recall_at_k(flags, len(relevant), K))
                )
                category.setdefault(key, question.category)
        return {
            key: (float(np.mean([v[0] for v in values])), float(np.mean([v[1] for v in values])), category[key])
            for key, values in sorted(out.items())
        }


def summary(groups: dict[tuple[str, str], tuple[float, float, int]]) -> dict[str, Any]:
    """Pooled and per-owner group-macro NDCG@10 and recall@10."""

    def means(keys: list[tuple[str, str]]) -> dict[str, Any]:
        return {
            "groups": len(keys),
            "ndcg": float(np.mean([groups[k][0] for k in keys])),
            "recall": float(np.mean([groups[k][1] for k in keys])),
        }

    keys = list(groups)
    owners = sorted({k[0] for k in keys})
    return {"pooled": means(keys), "owners": {o: means([k for k in keys if k[0] == o]) for o in owners}}


def bm25_closeness(config: Config) -> float:
    return abs(config.k1 - REFERENCE_BM25.k1) / REFERENCE_BM25.k1 + abs(config.b - REFERENCE_BM25.b) / REFERENCE_BM25.b


def weight_simplicity(config: Config) -> tuple[int, float]:
    return sum(1 for _, v in config.weights if v), sum(v for _, v in config.weights)


def choose(rows: list[dict[str, Any]], simplicity: Any) -> dict[str, Any]:
    """The best pooled NDCG@10, or the simplest configuration within ``TIE_MARGIN`` of it."""
    best = max(r["feedback"]["pooled"]["ndcg"] for r in rows)
    near = [r for r in rows if r["feedback"]["pooled"]["ndcg"] >= best - TIE_MARGIN]
    return min(near, key=lambda r: (simplicity(r["config"]), -r["feedback"]["pooled"]["ndcg"]))


def grid_stage(evaluator: Evaluator, configs: list[Config], stage: str) -> list[dict[str, Any]]:
    rows = []
    for i, config in enumerate(configs, 1):
        started = time.perf_counter()
        result = summary(evaluator.per_group(config, "feedback"))
        rows.append({"config": config, "feedback": result})
        _say(
            f"  {stage} [{i}/{len(configs)}] {config.label()}: feedback NDCG@10 {result['pooled']['ndcg']:.4f}, "
            f"recall@10 {result['pooled']['recall']:.4f} ({time.perf_counter() - started:.1f} s)"
        )
    return rows


def compare(reference: dict, candidate: dict) -> dict[str, Any]:
    """Paired per-group NDCG@10 differences (candidate − reference): pooled, per owner, per category."""
    keys = sorted(reference)

    def block(selected: list[tuple[str, str]]) -> dict[str, Any]:
        diff = np.array([candidate[k][0] - reference[k][0] for k in selected])
        low, high = bootstrap_interval(diff, samples=BOOTSTRAP_SAMPLES, seed=BOOTSTRAP_SEED)
        return {
            "groups": len(selected),
            "reference_ndcg": float(np.mean([reference[k][0] for k in selected])),
            "candidate_ndcg": float(np.mean([candidate[k][0] for k in selected])),
            "reference_recall": float(np.mean([reference[k][1] for k in selected])),
            "candidate_recall": float(np.mean([candidate[k][1] for k in selected])),
            "ndcg_gain": float(diff.mean()),
            "interval": [low, high],
            "improved": int(np.sum(diff > 1e-12)),
            "regressed": int(np.sum(diff < -1e-12)),
            "worse_beyond_interval": bool(high < 0.0),
        }

    owners = sorted({k[0] for k in keys})
    categories = sorted({reference[k][2] for k in keys})
    return {
        "pooled": block(keys),
        "owners": {o: block([k for k in keys if k[0] == o]) for o in owners},
        "categories": {
            f"{c} {CATEGORIES.get(c, '?')}": block([k for k in keys if reference[k][2] == c]) for c in categories
        },
    }


def committed_out(embedding: str) -> Path:
    """The committed results folder of an embedding: ``tuning`` (hashed) or ``tuning-<embedding>``."""
    return COMMITTED_RESULTS / ("tuning" if embedding == "hashed" else f"tuning-{embedding}")


def parse_grid(text: str | None, default: tuple[float, ...], name: str) -> tuple[float, ...]:
    if text is None:
        return default
    try:
        values = tuple(sorted({float(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise SystemExit(f"{name}: expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise SystemExit(f"{name}: at least one value")
    return values


def run(options: argparse.Namespace) -> dict[str, Any]:
    from prme_assets.demo.data import find_locomo_data

    started = time.perf_counter()
    path = find_locomo_data(options.data)
    wanted = [s.strip() for s in options.conversations.split(",") if s.strip()] if options.conversations else None
    conversations = read_locomo(path, wanted)
    if options.confirm_only and (options.k1 or options.b or options.bm25_only):
        raise SystemExit("--confirm-only chooses nothing, so it takes no grid (--k1, --b, --bm25-only)")
    k1_grid = parse_grid(options.k1, K1_GRID, "--k1")
    b_grid = parse_grid(options.b, B_GRID, "--b")
    for k1, b in itertools.product(k1_grid, b_grid):
        Bm25Parameters(k1=k1, b=b)  # every bound checked before any work
    embedder = embedding_provider(options.embedding)
    base = EngineSettings(scopes=(LOCOMO_SCOPE,))
    owners = []
    for conv in conversations:
        split = split_questions(conv)
        owners.append(Owner(conv, split.feedback, split.holdout))
    _say(
        f"LoCoMo tuning: {len(owners)} owners from {path}, embedding {options.embedding}; "
        f"{sum(len(o.feedback) for o in owners)} feedback / {sum(len(o.holdout) for o in owners)} holdout questions"
    )
    with tempfile.TemporaryDirectory(prefix="prme-tuning-") as tmp:
        store = open_store(f"duckdb:///{Path(tmp) / 'tuning.duckdb'}")
        try:
            loader = MemoryClient(settings=base, store=store, embedder=embedder)
            for owner in owners:
                load_conversation(loader, owner.conversation, LOCOMO_SCOPE)
            evaluator = Evaluator(store, embedder, owners, base)
            if options.confirm_only:
                report = _confirm(evaluator, interaction_fields())
            else:
                report = _tune(evaluator, k1_grid, b_grid, interaction_fields(), stage2=not options.bm25_only)
        finally:
            store.close()
    report.update(
        created_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        data={
            "name": path.name,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "conversations": [o.name for o in owners],
            "feedback_questions": {o.name: len(o.feedback) for o in owners},
            "holdout_questions": {o.name: len(o.holdout) for o in owners},
            "source": "LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0",
        },
        embedding={"name": options.embedding, "identity": embedder.identity()},
        retrievals=evaluator.retrievals,
        seconds_total=time.perf_counter() - started,
    )
    out = committed_out(options.embedding) if options.update_results else Path(options.out or SCRATCH_OUT)
    for written in write(report, out):
        _say(f"wrote {written}")
    return report


def _tune(
    evaluator: Evaluator,
    k1_grid: tuple[float, ...],
    b_grid: tuple[float, ...],
    fields: tuple[str, ...],
    *,
    stage2: bool,
) -> dict[str, Any]:
    """Stage 1, stage 2, then the holdout once. Interaction weights are always explicit (0 unless
    varied), so the engine's current defaults never leak into a configuration."""
    zero = tuple((name, 0.0) for name in fields)
    stage1 = grid_stage(evaluator, [Config(k1, b, zero) for k1, b in itertools.product(k1_grid, b_grid)], "bm25")
    chosen_bm25 = choose(stage1, bm25_closeness)["config"]
    _say(f"  chosen BM25: {chosen_bm25.label()}")
    rows2: list[dict[str, Any]] = []
    chosen = chosen_bm25
    if fields and stage2:
        grids = [INTERACTION_GRID[name] for name in fields]
        configs = [
            Config(chosen_bm25.k1, chosen_bm25.b, tuple(zip(fields, values))) for values in itertools.product(*grids)
        ]
        rows2 = grid_stage(evaluator, configs, "interaction")
        chosen = choose(rows2, weight_simplicity)["config"]
        _say(f"  chosen: {chosen.label()}")
    else:
        _say("  stage 2 skipped (--bm25-only, or ScoringWeights has no interaction weights)")
    feedback_chosen = next(r["feedback"] for r in (rows2 or stage1) if r["config"] == chosen)

    def row(r: dict[str, Any]) -> dict[str, Any]:
        return {"config": r["config"].as_dict(), "feedback": r["feedback"]}

    method = {
        "tie_margin": TIE_MARGIN,
        "k1_grid": list(k1_grid),
        "b_grid": list(b_grid),
        "interaction_grid": {name: list(INTERACTION_GRID[name]) for name in fields} if rows2 else {},
    }
    return {
        "schema": "prme-locomo-tuning-v1",
        "bm25_grid": [row(r) for r in stage1],
        "interaction_grid": [row(r) for r in rows2],
        **_confirmation(evaluator, chosen_bm25, chosen, feedback_chosen, stage1, method),
    }


def _confirm(evaluator: Evaluator, fields: tuple[str, ...]) -> dict[str, Any]:
    """``--confirm-only``: the engine's current defaults against the reference, choosing nothing."""
    defaults = evaluator.base
    chosen = Config(
        defaults.bm25.k1, defaults.bm25.b, tuple((name, float(getattr(defaults.scoring, name))) for name in fields)
    )
    chosen_bm25 = Config(chosen.k1, chosen.b, tuple((name, 0.0) for name in fields))
    _say(f"  confirm only: the current defaults {chosen.label()} against the reference, feedback questions …")
    feedback_chosen = summary(evaluator.per_group(chosen, "feedback"))
    report = _confirmation(evaluator, chosen_bm25, chosen, feedback_chosen, [], {"defaults": "EngineSettings()"})
    return {"schema": "prme-locomo-confirmation-v1", **report}


def _confirmation(
    evaluator: Evaluator,
    chosen_bm25: Config,
    chosen: Config,
    feedback_chosen: dict[str, Any],
    scored: list[dict[str, Any]],
    method: dict[str, Any],
) -> dict[str, Any]:
    """Step 5, shared by the tuning and ``--confirm-only``: the reference on the feedback questions
    (from ``scored`` where it is there), then the holdout questions once under the reference, the
    chosen BM25 alone and the chosen configuration."""
    reference = Config(REFERENCE_BM25.k1, REFERENCE_BM25.b, tuple((name, 0.0) for name, _ in chosen.weights))
    feedback_reference = next((r["feedback"] for r in scored if r["config"] == reference), None)
    if feedback_reference is None:
        feedback_reference = summary(evaluator.per_group(reference, "feedback"))
    _say("  holdout (once): reference, chosen BM25 alone, chosen …")
    arms = {
        "reference": evaluator.per_group(reference, "holdout"),
        "chosen_bm25_only": evaluator.per_group(chosen_bm25, "holdout"),
    }
    arms["chosen"] = arms["chosen_bm25_only"] if chosen == chosen_bm25 else evaluator.per_group(chosen, "holdout")
    return {
        "method": {
            "k": K,
            "limit": LIMIT,
            **method,
            "reference": reference.as_dict(),
            "bootstrap": {"algorithm": BOOTSTRAP_ALGORITHM, "samples": BOOTSTRAP_SAMPLES, "seed": BOOTSTRAP_SEED},
        },
        "chosen_bm25": chosen_bm25.as_dict(),
        "chosen": chosen.as_dict(),
        "feedback": {"reference": feedback_reference, "chosen": feedback_chosen},
        "holdout": {
            "chosen": compare(arms["reference"], arms["chosen"]),
            "chosen_bm25_only": compare(arms["reference"], arms["chosen_bm25_only"]),
        },
    }


# --- output -------------------------------------------------------------------------------------


def write(report: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    stem = "tuning" if "bm25_grid" in report else "confirmation"  # --confirm-only writes beside, not over, a tuning
    json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
    json_path.write_bytes(canonical_json(report) + b"\n")
    md_path.write_text(markdown(report), encoding="utf-8")
    return [json_path, md_path]


def _interval(block: dict[str, Any]) -> str:
    low, high = block["interval"]
    return f"{block['ndcg_gain']:+.3f} [{low:+.3f}, {high:+.3f}]"


def _holdout_table(comparison: dict[str, Any], name: str = "chosen") -> list[str]:
    lines = [
        f"| | groups | reference NDCG@10 | {name} NDCG@10 | gain [95% CI] | recall@10 ref → {name} | "
        "improved / regressed groups | worse beyond interval |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def line(name: str, b: dict[str, Any]) -> str:
        flag = "**yes**" if b["worse_beyond_interval"] else "no"
        return (
            f"| {name} | {b['groups']} | {b['reference_ndcg']:.3f} | {b['candidate_ndcg']:.3f} | {_interval(b)} | "
            f"{b['reference_recall']:.3f} → {b['candidate_recall']:.3f} | {b['improved']} / {b['regressed']} | "
            f"{flag} |"
        )

    lines += [line(o, b) for o, b in comparison["owners"].items()]
    lines.append(line("**pooled**", comparison["pooled"]))
    lines += [line(f"category {c}", b) for c, b in comparison["categories"].items()]
    return lines


def _attribution(report: dict[str, Any], name: str) -> list[str]:
    """The chosen BM25 alone on the holdout, when the chosen configuration has interaction weights."""
    if report["chosen"] == report["chosen_bm25"]:
        subject = "The chosen configuration is the chosen BM25" if name == "chosen" else f"The {name} are their BM25"
        return [f"{subject} with every interaction weight at 0.", ""]
    return [
        f"### Attribution: the {name} BM25 alone ({_config_text(report['chosen_bm25'])}, interaction weights 0)",
        "",
        *_holdout_table(report["holdout"]["chosen_bm25_only"]),
        "",
    ]


def markdown(report: dict[str, Any]) -> str:
    confirm = "bm25_grid" not in report  # --confirm-only: nothing chosen, no grids
    m = report["method"]
    chosen, ref = report["chosen"], m["reference"]
    fb = report["feedback"]
    h = report["holdout"]["chosen"]["pooled"]
    name = "current defaults" if confirm else "chosen"
    if confirm:
        title = "# LoCoMo default confirmation: current defaults vs previous defaults"
        rule = (
            "Nothing is chosen here (`--confirm-only`): the configuration is the engine's current defaults "
            "(`EngineSettings()`), chosen beforehand on the hashed embedding's feedback questions "
            "(`benchmarks/results/tuning/`). The feedback and the holdout questions (the learning benchmark's "
            "hash split) were each scored once under the reference and under the defaults."
        )
    else:
        title = "# LoCoMo default tuning: BM25 and interaction weights"
        rule = (
            "Choices use the **feedback** questions only (the learning benchmark's hash split); the holdout "
            "questions were scored once, after both choices. Rule: highest pooled feedback NDCG@10; within "
            f"{m['tie_margin']} of it, the simplest (BM25 closest to k1 1.5 / b 0.75; fewest and smallest "
            "interaction weights)."
        )
    lines = [
        title,
        "",
        f"Data {report['data']['name']} ({', '.join(report['data']['conversations'])}), embedding "
        f"{report['embedding']['name']}; {report['retrievals']} retrievals in {report['seconds_total']:.0f} s. "
        f"Produced by `python -m benchmarks.locomo_tuning{' --confirm-only' if confirm else ''}` "
        "(method in its docstring).",
        "",
        rule,
        "",
        "## Configurations" if confirm else "## Chosen",
        "",
        "| | configuration | feedback NDCG@10 | feedback recall@10 | holdout NDCG@10 | holdout recall@10 |",
        "|---|---|---|---|---|---|",
        f"| reference (previous defaults) | {_config_text(ref)} | {fb['reference']['pooled']['ndcg']:.4f} | "
        f"{fb['reference']['pooled']['recall']:.4f} | {h['reference_ndcg']:.4f} | {h['reference_recall']:.4f} |",
        f"| {name} | {_config_text(chosen)} | {fb['chosen']['pooled']['ndcg']:.4f} | "
        f"{fb['chosen']['pooled']['recall']:.4f} | {h['candidate_ndcg']:.4f} | {h['candidate_recall']:.4f} |",
        "",
        f"Pooled holdout NDCG@10 gain {_interval(h)} over {h['groups']} query groups.",
        "",
        f"## Holdout, {name} vs reference (paired bootstrap 95% intervals)",
        "",
        *_holdout_table(report["holdout"]["chosen"], name),
        "",
        *_attribution(report, name),
        *([] if confirm else _grid_tables(report)),
        f"## Feedback questions per owner (reference → {name} NDCG@10)",
        "",
        f"| owner | groups | reference | {name} |",
        "|---|---|---|---|",
    ]
    for owner, b in fb["chosen"]["owners"].items():
        lines.append(f"| {owner} | {b['groups']} | {fb['reference']['owners'][owner]['ndcg']:.4f} | {b['ndcg']:.4f} |")
    lines += [
        "",
        "## Limitations",
        "",
        "- Six development conversations, simulated relevance from LoCoMo evidence ids, this engine version "
        "and embedding; the holdout questions were already used by earlier studies of the same file "
        "(learning-ceiling-dev), so they are not untouched by the project as a whole.",
        (
            "- The defaults were chosen on another embedding's feedback questions; this run checks them, it "
            "does not re-tune them for this embedding."
            if confirm
            else "- A grid search on ~680 feedback questions can overfit the grid's noise; the tie rule prefers "
            "the simpler configuration and the holdout interval is the check."
        ),
        "",
    ]
    return "\n".join(lines)


def _grid_tables(report: dict[str, Any]) -> list[str]:
    """The stage 1 and stage 2 grids of a tuning run (feedback questions)."""
    m, chosen = report["method"], report["chosen"]
    lines = [
        "## Stage 1: BM25 grid (feedback questions, pooled NDCG@10; interaction weights 0)",
        "",
        "| k1 \\ b | " + " | ".join(f"{b:g}" for b in m["b_grid"]) + " |",
        "|---|" + "---|" * len(m["b_grid"]),
    ]
    cell = {(r["config"]["k1"], r["config"]["b"]): r["feedback"]["pooled"]["ndcg"] for r in report["bm25_grid"]}
    for k1 in m["k1_grid"]:
        lines.append(
            f"| {k1:g} | "
            + " | ".join(
                (
                    f"**{cell[(k1, b)]:.4f}**"
                    if (k1, b) == (report["chosen_bm25"]["k1"], report["chosen_bm25"]["b"])
                    else f"{cell[(k1, b)]:.4f}"
                )
                for b in m["b_grid"]
            )
            + " |"
        )
    if report["interaction_grid"]:
        names = _weight_names(m["interaction_grid"])
        lines += [
            "",
            f"## Stage 2: interaction weights at k1 {report['chosen_bm25']['k1']:g}, "
            f"b {report['chosen_bm25']['b']:g} (feedback questions)",
            "",
            "| " + " | ".join(names) + " | NDCG@10 | recall@10 |",
            "|" + "---|" * (len(names) + 2),
        ]
        for r in sorted(report["interaction_grid"], key=lambda r: -r["feedback"]["pooled"]["ndcg"]):
            mark = "**" if all(r["config"][n] == chosen.get(n) for n in names) else ""
            lines.append(
                "| "
                + " | ".join(f"{mark}{r['config'][n]:g}{mark}" for n in names)
                + f" | {r['feedback']['pooled']['ndcg']:.4f} | {r['feedback']['pooled']['recall']:.4f} |"
            )
    return [*lines, ""]


def _weight_names(config: dict[str, Any]) -> list[str]:
    """A configuration's interaction weights in ``INTERACTION_GRID`` order (JSON sorts keys), so the
    Markdown is the same whether rendered from a fresh report or from its saved JSON."""
    order = {name: i for i, name in enumerate(INTERACTION_GRID)}
    names = [name for name in config if name not in ("k1", "b")]
    return sorted(names, key=lambda name: (order.get(name, len(order)), name))


def _config_text(config: dict[str, Any]) -> str:
    rest = ", ".join(f"{k} {config[k]:g}" for k in _weight_names(config))
    return f"k1 {config['k1']:g}, b {config['b']:g}" + (f", {rest}" if rest else "")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.locomo_tuning", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="a LoCoMo-format JSON file (default: the development file)")
    parser.add_argument("--conversations", default=None, help="comma-separated sample ids (default: all)")
    parser.add_argument(
        "--embedding",
        choices=("hashed", "minilm"),
        default="hashed",
        help="semantic channel (minilm needs the 'semantic' extra)",
    )
    parser.add_argument("--k1", default=None, help=f"k1 grid (default {','.join(map(str, K1_GRID))})")
    parser.add_argument("--b", default=None, help=f"b grid (default {','.join(map(str, B_GRID))})")
    parser.add_argument("--bm25-only", action="store_true", help="skip stage 2 (the interaction weights)")
    parser.add_argument(
        "--confirm-only",
        action="store_true",
        help="choose nothing: the engine's current defaults vs the reference, on the feedback questions and once "
        "on the holdout questions (confirmation.json, confirmation.md)",
    )
    add_output_options(
        parser, scratch=SCRATCH_OUT, committed="benchmarks/results/tuning, or tuning-<embedding> for another embedding"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    run(build_parser().parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
