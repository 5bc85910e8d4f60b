"""The LoCoMo learning benchmark's report: frozen models that check their own invariants, and the
three files written from them (``results.json``, ``results.md``, ``holdout_ndcg.png``).

A report that loads is consistent: no owner shows an activation unless both gates passed in its
own run with a gated holdout, an owner's offline decision agrees with its offline check, and the
null-control and total counts add up.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

from pydantic import Field, NonNegativeInt, model_validator

from prme_assets.gate_table import GATE_TABLE
from prme_core.canonical import canonical_json, parse_json
from prme_core.features import WEIGHT_NAMES
from prme_core.learning.config import POOL_DEFAULTS
from prme_core.learning.full_retrieval import DEFAULT_ALPHA_BUDGET
from prme_core.learning.gates import look_alpha
from prme_core.types import FrozenModel, Unit

CheckMark = Literal["pass", "fail", "not reached"]
RANKINGS = (
    "baseline",
    "learned_v1",
    "learned_v2",
    "lambdarank",
    "lambdarank_candidates",
    "bm25_only",
    "semantic_only",
    "lexical_rerank",
    "semantic_rerank",
    "oracle_v2",
    "feedback_oracle_v2",
)
RANKING_LABELS = {
    "baseline": "baseline (base scoring)",
    "learned_v1": "learned v1 (six multipliers, judged candidates)",
    "learned_v2": "learned v2 (family 2, pool replay; the gated proposal)",
    "bm25_only": "BM25 only (all turns)",
    "semantic_only": "embedding only (all turns)",
    "lexical_rerank": "baseline candidates by lexical feature",
    "semantic_rerank": "baseline candidates by semantic feature",
    "lambdarank": "LambdaRank on the baseline pools",
    "lambdarank_candidates": "LambdaRank on the baseline's returned candidates",
    "oracle_v2": "family-2 holdout oracle (chosen on the holdout: reporting only)",
    "feedback_oracle_v2": "family-2 feedback oracle (chosen on the feedback questions with complete evidence)",
}
CHART_RANKINGS = (
    "baseline",
    "learned_v1",
    "learned_v2",
    "lambdarank",
    "bm25_only",
    "feedback_oracle_v2",
    "oracle_v2",
)
POWER_GAIN = 0.03
"""The gain the power table sizes the gates for (issue 16)."""
PASSED_OFFLINE = "improved_on_observed_candidates"
PASSED_HOLDOUT = "improved_full_retrieval"
GATE_NAMES = tuple(g.name for g in GATE_TABLE)
"""The gates a report records, in pipeline order (``prme_assets.gate_table``, which imports no Dagster)."""
LIMITATIONS = (
    "Six conversations (owners) of the development file only; every figure describes those owners, this "
    "engine version and its feature identity. Gate thresholds are the defaults; nothing here was tuned on them.",
    "Feedback is simulated from LoCoMo's evidence ids (structured evaluation): returned evidence turns are "
    "positives, other returned turns negatives. Evidence ids are the dataset's judgments, not verified facts, "
    "and the few ids that name no turn are reported, never guessed.",
    "The holdout judges retrieval (recall/NDCG/MRR@10 against the complete evidence sets), not answers.",
    "'Not gated' holdout figures were computed for reporting only, after the offline gate had stopped the "
    "run; they authorize nothing and spend those holdout questions for any future tuning.",
    "BM25-only and embedding-only rank every turn with the engine's own indexes; the recorded-feature reranks "
    "can only reorder the baseline arm's returned candidates (limit 20); learned v1, LambdaRank and the oracle "
    "re-rank the baseline arm's recorded pool (pool replay equals a fresh retrieval over the same memory).",
    "The family-2 holdout oracle is chosen on the holdout questions themselves: it bounds what any profile of "
    "the family could gain here, and is evidence of nothing else.",
    "The family-2 feedback oracle is chosen on the owner's feedback questions (training and validation groups) "
    "scored against their complete evidence sets, with no regularization: more label information than any "
    "learner gets from feedback, so its holdout gain shows what a family-2 learner could take from these "
    "questions even with perfect labels (it is not a strict bound: a regularized fit can land a little higher "
    "by chance); it decides nothing.",
    "The exploratory refits in the diagnosis look at validation labels: they explain, they do not qualify "
    "as evidence; a change they suggest needs fresh feedback and a fresh holdout.",
    "The null control shuffles labels within each request (keeping each request's counts) for the offline "
    "step only; holdouts of null proposals run against base scoring.",
)


class Metrics(FrozenModel):
    """Group-macro recall, NDCG and MRR at k over holdout query groups."""

    k: int = Field(ge=1)
    query_groups: NonNegativeInt
    recall: Unit
    ndcg: Unit
    mrr: Unit


class Coverage(FrozenModel):
    feedback_records: NonNegativeInt
    requests_with_pairs: NonNegativeInt
    training_groups: NonNegativeInt
    validation_groups: NonNegativeInt
    explicit_pairs: NonNegativeInt


class Offline(FrozenModel):
    decision: str
    family: str
    algorithm: str
    fit_path: str
    validation_ndcg_gain: float | None
    validation_gain_interval: tuple[float, float] | None
    validation_pairwise_gain: float | None
    multipliers: dict[str, float]
    training_loss_before: float | None
    training_loss_after: float | None
    observed_sd: float | None = None
    groups_for_power: int | None = None
    alternative: dict[str, Any] | None = None
    evidence_groups: int | None = None
    evidence_ndcg_gain: float | None = None
    evidence_gain_interval: tuple[float, float] | None = None
    evidence_sign_flip_p: float | None = None
    """Version-3 reports: what the offline gate judged (validation and cross-fitted training groups)."""


class Holdout(FrozenModel):
    """Baseline vs candidate multipliers on the registered holdout (gated or, labelled, not)."""

    gated: bool
    status: str
    decision: str | None
    baseline: Metrics | None
    candidate: Metrics | None
    ndcg_gain: float | None
    ndcg_gain_interval: tuple[float, float] | None
    recall_gain: float | None
    mrr_gain: float | None
    regression_fraction: float | None
    harm: float | None = None
    severe_share: float | None = None
    observed_sd: float | None = None
    groups_for_power: int | None = None
    trials: NonNegativeInt
    message: str = ""

    @property
    def label(self) -> str:
        return "gated" if self.gated else "not gated"


class Activation(FrozenModel):
    requested: bool
    activated: bool
    reason: str
    profile_id: str | None = None

    @model_validator(mode="after")
    def _requested_first(self) -> Activation:
        if self.activated and not (self.requested and self.profile_id):
            raise ValueError("an activation needs an activation request and a profile id")
        return self


class NullControl(FrozenModel):
    seeds: NonNegativeInt
    offline_accepts: NonNegativeInt
    holdout_accepts: NonNegativeInt
    would_activate: NonNegativeInt
    insufficient_data: NonNegativeInt
    per_seed: tuple[dict[str, Any], ...]

    @model_validator(mode="after")
    def _counts(self) -> NullControl:
        if len(self.per_seed) != self.seeds:
            raise ValueError("one row per null seed")
        if not self.would_activate <= self.holdout_accepts <= self.offline_accepts <= self.seeds:
            raise ValueError("null counts must nest: activations ≤ holdout accepts ≤ offline accepts ≤ seeds")
        if sum(r["offline_decision"] == PASSED_OFFLINE for r in self.per_seed) != self.offline_accepts:
            raise ValueError("offline_accepts disagrees with the per-seed decisions")
        if sum(r["holdout_decision"] == PASSED_HOLDOUT for r in self.per_seed) != self.holdout_accepts:
            raise ValueError("holdout_accepts disagrees with the per-seed decisions")
        return self


class OwnerResult(FrozenModel):
    owner: str
    partition: str
    turns: NonNegativeInt
    questions: NonNegativeInt
    feedback_questions: NonNegativeInt
    holdout_questions: NonNegativeInt
    questions_without_evidence: NonNegativeInt
    unresolved_evidence_ids: tuple[str, ...]
    feedback: dict[str, int]
    coverage: Coverage
    exclusions: dict[str, int]
    offline: Offline
    offline_v1: Offline
    checks: dict[str, CheckMark]
    dagster_run_success: bool
    holdout: Holdout
    activation: Activation
    rankings: dict[str, Metrics]
    lambdarank: dict[str, Any]
    oracle: dict[str, Any]
    feedback_oracle: dict[str, Any] = {}
    null_control: NullControl
    diagnosis: dict[str, Any]
    seconds: float = Field(ge=0.0)

    @model_validator(mode="after")
    def _invariants(self) -> OwnerResult:
        offline_check = self.checks.get("offline_gate_passed", "not reached")
        if offline_check != "not reached" and (offline_check == "pass") != (self.offline.decision == PASSED_OFFLINE):
            raise ValueError(
                f"{self.owner}: offline check {offline_check} disagrees with decision {self.offline.decision}"
            )
        if self.activation.activated:
            if any(self.checks.get(g) != "pass" for g in GATE_NAMES):
                raise ValueError(f"{self.owner}: activated without every gate passing")
            if not (self.holdout.gated and self.holdout.decision == PASSED_HOLDOUT):
                raise ValueError(f"{self.owner}: activated without a gated, improved holdout")
        if self.holdout.gated != (self.checks.get("holdout_gate_passed", "not reached") != "not reached"):
            raise ValueError(f"{self.owner}: a gated holdout is one the holdout gate evaluated")
        missing = [r for r in ("baseline", "learned_v2") if r not in self.rankings]
        if self.holdout.baseline is not None and missing:
            raise ValueError(f"{self.owner}: rankings lack {missing}")
        return self


class Embedding(FrozenModel):
    requested: Literal["hashed", "minilm", "auto"]
    used: Literal["hashed", "minilm"]
    identity: dict[str, Any]
    note: str = ""


class BenchmarkReport(FrozenModel):
    schema_version: Literal[2] = 2
    benchmark: Literal["locomo_learning"] = "locomo_learning"
    created_at: str
    data: dict[str, Any]
    store: str
    embedding: Embedding
    options: dict[str, Any]
    policy: dict[str, Any]
    owners: tuple[OwnerResult, ...] = Field(min_length=1)
    total: dict[str, Any]
    seconds_total: float = Field(ge=0.0)
    limitations: tuple[str, ...] = LIMITATIONS

    @model_validator(mode="after")
    def _totals(self) -> BenchmarkReport:
        t = self.total
        if t["owners"] != len(self.owners) or t["activated"] != sum(o.activation.activated for o in self.owners):
            raise ValueError("total owner and activation counts disagree with the owners")
        if t["null_would_activate"] != sum(o.null_control.would_activate for o in self.owners):
            raise ValueError("total null activations disagree with the owners")
        return self


# --- writing ------------------------------------------------------------------------------------


def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:+.{digits}f}" if digits < 0 else f"{value:.{digits}f}"
    return str(value)


def _gain(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


def _interval(value: tuple[float, float] | None) -> str:
    return "—" if value is None else f"[{value[0]:+.3f}, {value[1]:+.3f}]"


def _gain_with_interval(value: float | None, interval: tuple[float, float] | None) -> str:
    """'+0.012 [-0.010, +0.034]', or one dash when there is no fit (insufficient coverage)."""
    return "—" if value is None and interval is None else f"{_gain(value)} {_interval(interval)}"


def write_report(report: BenchmarkReport, out: Path, *, chart: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "results.md"]
    body = canonical_json(report.model_dump(mode="json"), finite=True)
    paths[0].write_bytes(parse_json_pretty(body))
    chart_name = None
    if chart:
        try:
            paths.append(write_chart(report, out / "holdout_ndcg.png"))
            chart_name = paths[-1].name
        except ImportError:  # matplotlib is in the 'bench' extra
            chart_name = None
    paths[1].write_text(markdown(report, chart_name=chart_name), encoding="utf-8")
    return paths


def parse_json_pretty(body: bytes) -> bytes:
    import json

    return (json.dumps(parse_json(body), indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def load_report(path: Path) -> BenchmarkReport:
    return BenchmarkReport.model_validate_json(path.read_bytes())


def write_chart(report: BenchmarkReport, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [o.owner for o in report.owners] + ["all owners"]
    series = {
        name: [o.rankings[name].ndcg if name in o.rankings else float("nan") for o in report.owners]
        + [report.total["rankings"].get(name, {}).get("ndcg", float("nan"))]
        for name in CHART_RANKINGS
    }
    fig, ax = plt.subplots(figsize=(11, 4.8), dpi=110)
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width, label=RANKING_LABELS[name])
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("holdout NDCG@10")
    ax.set_ylim(0, 1)
    activated = sum(o.activation.activated for o in report.owners)
    ax.set_title(
        f"LoCoMo holdout NDCG@10 per owner ({report.embedding.used} embedding; "
        f"{activated} of {len(report.owners)} profiles activated; learned = candidate multipliers, "
        "not gated where the offline gate stopped)",
        fontsize=9,
    )
    ax.legend(fontsize=8, ncol=3, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def markdown(report: BenchmarkReport, *, chart_name: str | None) -> str:
    t = report.total
    lines = [
        "# LoCoMo learning benchmark",
        "",
        f"Generated {report.created_at} by `python -m benchmarks.locomo_learning` on {report.data['name']} "
        f"({len(report.owners)} conversations = owners; data sha256 `{report.data['sha256'][:16]}…`), "
        f"store {report.store}, embedding **{report.embedding.used}** "
        f"(requested {report.embedding.requested}{'; ' + report.embedding.note if report.embedding.note else ''}). "
        f"Total run time {report.seconds_total:.1f} s. LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0 "
        "(read at run time, not copied here).",
        "",
        "## Headline",
        "",
        *headline(report),
        "",
        "### Learning loop per owner (family 2 by pool replay, through the Dagster assets and gates)",
        "",
        "| owner | train / val groups | pairs | offline decision | gate's evidence: groups, NDCG gain [95% CI], "
        "sign-flip p | validation NDCG gain [95% CI] | pairwise alternative [95% CI] | holdout | holdout decision | "
        "NDCG@10 base → learned | harm / severe share | recall@10 base → learned | activated |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in report.owners:
        h = o.holdout
        b, c = h.baseline, h.candidate
        alt = o.offline.alternative or {}
        lines.append(
            f"| {o.owner} | {o.coverage.training_groups} / {o.coverage.validation_groups} | {o.coverage.explicit_pairs} | "
            f"{o.offline.decision} | {_evidence(o.offline)} | "
            f"{_gain_with_interval(o.offline.validation_ndcg_gain, o.offline.validation_gain_interval)} | "
            f"{_gain_with_interval(alt.get('validation_ndcg_gain'), _pair(alt.get('validation_gain_interval')))} | "
            f"{h.label} | {h.decision or h.status} | "
            f"{_f(b.ndcg if b else None)} → {_f(c.ndcg if c else None)} | "
            f"{_f(h.harm)} / {_f(h.severe_share, 2)} | {_f(b.recall if b else None)} → "
            f"{_f(c.recall if c else None)} | {'yes' if o.activation.activated else 'no'} |"
        )
    tb, tl = t["rankings"].get("baseline"), t["rankings"].get("learned_v2")
    if tb and tl:
        lines.append(
            f"| **all** | {t['training_groups']} / {t['validation_groups']} | {t['explicit_pairs']} | "
            f"{t['offline_passed']} passed | — | — | — | — | {t['holdout_passed']} passed | "
            f"{_f(tb['ndcg'])} → {_f(tl['ndcg'])} | — | {_f(tb['recall'])} → {_f(tl['recall'])} | {t['activated']} |"
        )
    lines += [
        "",
        "'learned' is the owner's own family-2 proposal (six multipliers and three interaction weights, fitted by "
        "re-ranking each training request's recorded pool for judged NDCG@10). The offline gate judges its "
        "evidence: the proposal on the validation groups and each training group out of fold (judged by a "
        "proposal fitted on the other training folds); it needs sign-flip p ≤ "
        f"{_policy(report, 'max_p_value')} there and the proposal itself not measurably worse on validation (its bootstrap interval there reaches 0). Where the offline gate stopped the "
        "run, the holdout was computed anyway with `client.evaluate_holdout(proposal)` for reporting only (**not "
        "gated**); an insufficient-coverage proposal keeps unity, so its learned arm equals the baseline. 'Pairwise "
        "alternative' is the same pools and parameters fitted by pairwise logistic loss, reported beside it; it "
        "decides nothing. Harm is the mean NDCG@10 lost over all holdout groups by the regressed ones (gate: ≤ "
        f"{_policy(report, 'holdout_max_mean_harm')}); severe share the share of groups losing ≥ "
        f"{_policy(report, 'holdout_severe_loss')} (gate: ≤ {_policy(report, 'holdout_max_severe_share')}).",
        "",
        "### Version 1 beside version 2 (offline, on the same validation groups)",
        "",
        "| owner | v1: six multipliers on judged candidates — decision, gain [95% CI] | "
        "v2: family 2 on pools — decision, gain [95% CI] | v2 interaction weights (coverage, bigrams, names) |",
        "|---|---|---|---|",
    ]
    for o in report.owners:
        v1, v2 = o.offline_v1, o.offline
        m = v2.multipliers
        weights = (
            ", ".join(f"{m[k]:.2f}" for k in ("term_coverage", "bigram_overlap", "entity_match"))
            if "term_coverage" in m
            else "—"
        )
        lines.append(
            f"| {o.owner} | {v1.decision}, {_gain_with_interval(v1.validation_ndcg_gain, v1.validation_gain_interval)} | "
            f"{v2.decision}, {_gain_with_interval(v2.validation_ndcg_gain, v2.validation_gain_interval)} | {weights} |"
        )
    lines += [
        "",
        "The two metrics differ: v1 ranks only the judged candidates (judged NDCG), v2 re-ranks the whole pool and "
        "scores the returned list (judged positives gain, everything else does not), so their gains are not on "
        "one scale.",
        "",
        *power_section(report),
        "",
    ]
    lines += [
        "### Holdout rankings compared (NDCG@10 / recall@10 / MRR@10, same holdout questions)",
        "",
        "| owner | " + " | ".join(RANKING_LABELS[r] for r in RANKINGS) + " |",
        "|---|" + "---|" * len(RANKINGS),
    ]
    for o in report.owners:
        cells = [
            f"{o.rankings[r].ndcg:.3f} / {o.rankings[r].recall:.3f} / {o.rankings[r].mrr:.3f}"
            if r in o.rankings
            else "—"
            for r in RANKINGS
        ]
        lines.append(f"| {o.owner} | " + " | ".join(cells) + " |")
    cells = [
        f"{t['rankings'][r]['ndcg']:.3f} / {t['rankings'][r]['recall']:.3f} / {t['rankings'][r]['mrr']:.3f}"
        if r in t["rankings"]
        else "—"
        for r in RANKINGS
    ]
    lines.append("| **all** | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Family-2 holdout oracle per owner (the adjustment chosen on the holdout questions themselves; reporting "
        "only): "
        + ", ".join(
            f"{o.owner} {_f(o.oracle.get('ndcg_at_identity'))} → {_f(o.oracle.get('ndcg'))}" for o in report.owners
        )
        + ".",
        "",
        "Family-2 feedback oracle per owner (the adjustment that scores best on the owner's feedback questions "
        "against their complete evidence sets — every relevant turn, returned or not, more than feedback ever "
        "tells — applied to the holdout; reporting only): "
        + ", ".join(
            f"{o.owner} feedback {_f(o.feedback_oracle.get('ndcg_at_identity'))} → "
            f"{_f(o.feedback_oracle.get('ndcg'))} on {o.feedback_oracle.get('chosen_on', '—')} groups"
            for o in report.owners
        )
        + ".",
        "",
    ]
    if chart_name:
        lines += [f"![holdout NDCG@10 per owner]({chart_name})", ""]
    else:
        lines += ["(No chart: matplotlib is not installed — `pip install -e '.[bench]'`.)", ""]
    lines += [
        "### Null control",
        "",
        "| owner | seeds | offline accepts | holdout accepts | would activate | insufficient data |",
        "|---|---|---|---|---|---|",
    ]
    for o in report.owners:
        n = o.null_control
        lines.append(
            f"| {o.owner} | {n.seeds} | {n.offline_accepts} | {n.holdout_accepts} | {n.would_activate} | "
            f"{n.insufficient_data} |"
        )
    lines += [
        "",
        "### Data and coverage",
        "",
        "| owner | turns | questions | feedback / holdout questions | "
        "without evidence | unresolved evidence ids | feedback retrievals without returned evidence | "
        "checks (coverage, replay, offline, memory, holdout, evidence, runtime) | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in report.owners:
        marks = " ".join(
            {"pass": "✓", "fail": "✗", "not reached": "·"}[o.checks.get(g, "not reached")] for g in GATE_NAMES
        )
        lines.append(
            f"| {o.owner} | {o.turns} | {o.questions} | {o.feedback_questions} / {o.holdout_questions} | "
            f"{o.questions_without_evidence} | {', '.join(o.unresolved_evidence_ids) or '—'} | "
            f"{o.feedback.get('without_returned_evidence', 0)} | {marks} | {o.seconds:.1f} |"
        )
    lines += ["", *diagnosis_section(report), "", *method_section(report), "", "## Limitations", ""]
    lines += [f"- {item}" for item in report.limitations]
    return "\n".join(lines) + "\n"


def _pair(value: Any) -> tuple[float, float] | None:
    return None if value is None else (float(value[0]), float(value[1]))


def _policy(report: BenchmarkReport, name: str) -> str:
    value = report.policy.get(name)
    return "—" if value is None else f"{value:g}"


def groups_for(sd: float | None, alpha: float, gain: float = POWER_GAIN) -> int | None:
    """Groups a gate testing one-sided at ``alpha`` needs to pass a true ``gain`` with 80% power
    at spread ``sd`` (None without a spread: a proposal that changed no group says nothing)."""
    if not sd:
        return None
    z = NormalDist().inv_cdf(1.0 - alpha)
    return max(2, math.ceil((z + 0.84) ** 2 * sd * sd / (gain * gain)))


def _evidence(offline: Offline) -> str:
    """What a version-3 offline gate judged: the validation and the cross-fitted training groups."""
    if offline.evidence_groups is None:
        return "—"
    gain = _gain_with_interval(offline.evidence_ndcg_gain, offline.evidence_gain_interval)
    return f"{offline.evidence_groups}, {gain}, p {offline.evidence_sign_flip_p:.3g}"


def headline(report: BenchmarkReport) -> list[str]:
    t = report.total
    r, pooled = t["rankings"], t.get("pooled", {})

    def arm(name: str, label: str) -> str:
        if name not in r:
            return f"{label} —"
        p = pooled.get(name)
        extra = f" ({_gain(p['gain'])} {_interval(_pair(p['interval']))})" if p else ""
        return f"{label} {_f(r[name]['ndcg'])}{extra}"

    groups = r.get("baseline", {}).get("query_groups", 0)
    activated = [o for o in report.owners if o.activation.activated]
    at_or_above = [
        o.owner
        for o in activated
        if o.holdout.baseline and o.holdout.candidate and o.holdout.candidate.ndcg >= o.holdout.baseline.ndcg
    ]
    return [
        f"- Profiles activated: **{t['activated']} of {t['owners']}** owners. Offline gate passed for "
        f"{t['offline_passed']}, holdout gate passed for {t['holdout_passed']} (gated holdouts: {t['holdout_gated']})."
        + (
            f" Every activated owner is at or above its baseline on the holdout: "
            f"{'yes' if len(at_or_above) == len(activated) else 'NO'} ({', '.join(o.owner for o in activated)})."
            if activated
            else ""
        ),
        f"- Holdout NDCG@10 pooled over all {groups} holdout query groups (gain over the baseline [paired bootstrap "
        "95% CI]): "
        + "; ".join(
            [
                arm("baseline", "baseline"),
                arm("learned_v1", "learned v1"),
                arm("learned_v2", "**learned v2**"),
                arm("lambdarank", "LambdaRank on the same pools"),
                arm("lambdarank_candidates", "LambdaRank on the returned candidates"),
                arm("bm25_only", "BM25 only"),
                arm("semantic_only", "embedding only"),
                arm("oracle_v2", "family-2 holdout oracle (reporting only)"),
                arm("feedback_oracle_v2", "family-2 feedback oracle (complete evidence on the feedback questions)"),
            ]
        )
        + ".",
        f"- Null control (labels shuffled within each request, {t['null_seeds']} seeds per owner): offline gate "
        f"accepted {t['null_offline_accepts']} of {t['null_runs']} runs ({t['null_offline_rate']:.1%}), holdout "
        f"accepted {t['null_holdout_accepts']}, would have activated {t['null_would_activate']}.",
    ]


def power_section(report: BenchmarkReport) -> list[str]:
    screen = float(report.policy.get("max_p_value", POOL_DEFAULTS["max_p_value"]))
    first_look = look_alpha(float(report.policy.get("holdout_alpha_budget", DEFAULT_ALPHA_BUDGET)), 1)
    lines = [
        f"### Power: the groups a gate needs for a true +{POWER_GAIN:.2f} (80%; the screen at p ≤ {screen:g}, "
        f"the holdout's first look at p ≤ {first_look:g}, one-sided)",
        "",
        "| owner | validation groups | validation SD (v2) | groups for +0.03 (validation) | judged queries to "
        "collect for it | holdout groups | holdout SD (v2) | groups for +0.03 (holdout) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    fraction = float(report.policy.get("validation_fraction", 0.3))
    for o in report.owners:
        v_sd, h_sd = o.offline.observed_sd, o.holdout.observed_sd
        v_need, h_need = groups_for(v_sd, screen), groups_for(h_sd, first_look)
        collect = None if v_need is None else math.ceil(v_need / fraction)
        groups = o.holdout.baseline.query_groups if o.holdout.baseline else None
        lines.append(
            f"| {o.owner} | {o.coverage.validation_groups} | {_f(v_sd)} | {_f(v_need)} | {_f(collect)} | "
            f"{_f(groups)} | {_f(h_sd)} | {_f(h_need)} |"
        )
    lines += [
        "",
        "n = ⌈(z₁₋α + 0.84)² · SD² / 0.03²⌉ at the gate's one-sided level α, with the observed per-group SD "
        "of the family-2 proposal's differences; judged queries to collect = validation groups needed / the "
        f"validation share ({fraction:g}). A later holdout look spends less (look k: budget / (k(k+1))) and "
        "needs more groups.",
    ]
    return lines


def diagnosis_section(report: BenchmarkReport) -> list[str]:
    lines = [
        "## Diagnosis: what the version-1 (judged-candidate) offline gate sees",
        "",
        "| owner | positives / judged per request | inherited share of judged (positives, negatives) | "
        "pairs with identical features (positive behind) | constant weight features | train NDCG gain | "
        "validation NDCG gain | validation groups improved / regressed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in report.owners:
        d = o.diagnosis
        if "label_density" not in d:
            lines.append(f"| {o.owner} | {d.get('status', '—')} | | | | | | |")
            continue
        ld, inh, fit = d["label_density"], d["session_inheritance"], d["fit"]
        lines.append(
            f"| {o.owner} | {ld['positives_per_request_mean']:.2f} / {ld['judged_candidates_per_request']:.1f} | "
            f"{inh['judged_inherited_share']:.0%} ({inh['positives_inherited']}/{inh['positives']}, "
            f"{inh['negatives_inherited']}/{inh['negatives']}) | {inh['pairs_with_identical_features']} of "
            f"{inh['pairs']} ({inh['pairs_with_identical_features_positive_behind']}) | "
            f"{', '.join(d['constant_weight_features']) or '—'} | {_gain(fit['train']['ndcg_gain'])} | "
            f"{_gain(fit['validation']['ndcg_gain'])} | {fit['validation']['improved_groups']} / "
            f"{fit['validation']['regressed_groups']} |"
        )
    lines += [
        "",
        "Exploratory refits (**not gated**; they look at validation labels — see the limitations):",
        "",
        "| owner | variant | multipliers (sem, lex, graph, rec, sal, conf) | train gain | validation gain [95% CI] |",
        "|---|---|---|---|---|",
    ]
    for o in report.owners:
        for row in o.diagnosis.get("exploratory_refits", []):
            m = row["multipliers"]
            lines.append(
                f"| {o.owner} | {row['variant']} | "
                + ", ".join(f"{m[k]:.2f}" for k in WEIGHT_NAMES)
                + f" | {_gain(row['train_ndcg_gain'])} | {_gain(row['validation_ndcg_gain'])} "
                f"{_interval(row['validation_interval'])} |"
            )
    notes = report.total.get("diagnosis_notes") or []
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    return lines


def _default_policy() -> dict[str, Any]:
    from prme_assets.resources import LearningPolicyResource

    return LearningPolicyResource().model_dump()


def policy_changes(policy: dict[str, Any]) -> dict[str, Any]:
    """The fields of a recorded learning policy whose value is not today's default's (a report
    rendered after a default changed names the field its run differs in); a field the policy
    predates counts as None (e.g. ``shrinkage_risk_aversion``: the risk-neutral choice)."""
    default = _default_policy()
    return {k: policy.get(k) for k in sorted({*default, *policy}) if default.get(k) != policy.get(k)}


def _policy_kind(policy: dict[str, Any]) -> str:
    """ "the default", or "a NON-DEFAULT" naming each field that differs from the default's value."""
    differs = policy_changes(policy)
    if not differs:
        return "the default"
    return "a NON-DEFAULT (" + ", ".join(f"{k}={v}" for k, v in sorted(differs.items())) + ")"


def method_section(report: BenchmarkReport) -> list[str]:
    o = report.options
    return [
        "## Method",
        "",
        "1. Each conversation is one owner; every turn is stored as one memory (`Speaker: text`, image caption "
        "appended; event time from its session clock, read as UTC).",
        "2. Questions with at least one resolvable evidence id are split by a hash of the normalized question: "
        "~60% feedback, ~40% holdout (never both). Questions without evidence and evidence ids naming no turn "
        "are counted above.",
        f"3. Feedback: one real retrieval per feedback question (limit {o['limit']}, base scoring, reference time one "
        "day after the last session), then structured-evaluation labels: returned evidence turns true, other "
        "returned turns false.",
        f"4. Holdout questions are registered with their complete evidence sets (limit {o['limit']}); then one "
        "Dagster partition per owner materializes `feedback_snapshot → query_split → ranking_proposal → "
        "full_retrieval_holdout → candidate_profile` with all seven blocking gates on a temporary instance "
        "(`dg.instance_for_test()`), and `activation_request` + `activate_profile_job` run when it returns a "
        "run request. The learning policy is "
        + _policy_kind(report.policy)
        + " `LearningPolicyResource` ("
        + ", ".join(
            f"{k}={v}"
            for k, v in report.policy.items()
            if k
            in (
                "min_training_queries",
                "min_validation_queries",
                "min_ndcg_gain",
                "holdout_min_query_groups",
                "holdout_min_ndcg_gain",
                "holdout_max_mean_harm",
                "holdout_severe_loss",
                "holdout_max_severe_share",
                "holdout_alpha_budget",
                "fit",
                "family",
                "pool_regularization",
                "ndcg_margin",
                "max_p_value",
            )
        )
        + ").",
        "5. Holdout metrics come from the holdout report (k = 10). BM25-only and embedding-only rank every turn "
        "of the owner by the engine's own BM25 and embedding indexes (no pool, weights or expansion). "
        "The recorded-feature reranks order the baseline arm's returned candidates by one trace feature. "
        "Learned v1 is the judged-candidate fit of six multipliers (`fit=judged_pairwise`) applied by pool replay "
        "of the baseline arm. LambdaRank (LightGBM, `lambdarank` objective, 200 rounds of 7-leaf trees, no tuning or "
        "early stopping) is trained on the training requests' recorded pools (the judged members' trace features, "
        "path score, base score and base position) and ranks every member of the baseline arm's pool; the same "
        "model settings trained on the judged candidates' recorded features (score and rank included) reorder "
        'only the baseline arm\'s returned candidates ("on the returned candidates"). The pool model sees only '
        "returned members in training (the judged ones) and every member when ranking, and a quarter of LoCoMo's "
        "positives are session-inherited (their own features are weak), so it promotes weak members: it is the "
        "weaker challenger here. The family-2 holdout oracle searches "
        "the family (the pool fit's search, 64 starts, no regularization) for the best group-mean NDCG@10 on the "
        "holdout questions against their complete evidence sets. The family-2 feedback oracle runs the same search "
        "on the owner's recorded feedback retrievals (every feedback question, training and validation groups) "
        "against their complete evidence sets and re-ranks the holdout baseline pools with what it found.",
        f"6. Null control: {o['null_seeds']} seeds per owner; each permutes the label values within every request "
        "and reruns the pure offline evaluation on the same snapshot; seeds that pass offline get a real paired "
        "holdout against base scoring.",
        "7. Diagnosis: computed from the learner's prepared observations (its judged candidates and scoring).",
    ]
