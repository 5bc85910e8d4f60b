"""The one table of stages and gates: which gate checks which stage, from which stage outputs,
with which ``prme_core`` verdict. The asset checks (``checks``), the batched learning job's
per-partition evaluations (``batching``) and every stage's refusal to consume evidence a gate
said no to (``guards``) all derive from it, so a gate added here is checked, evaluated in batches
and guards the next stage in one step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prme_assets.outcome import Decided
from prme_core.engine import MemoryClient
from prme_core.learning import verdicts
from prme_core.learning.verdicts import Verdict
from prme_core.profiles import verdicts as profile_verdicts

Evidence = dict[str, Any]
"""A partition's stage outputs so far, by asset name."""

STAGES: tuple[str, ...] = (
    "feedback_snapshot",
    "query_split",
    "ranking_proposal",
    "full_retrieval_holdout",
    "candidate_profile",
)
STAGE_INPUTS: dict[str, tuple[str, ...]] = {
    "feedback_snapshot": (),
    "query_split": ("feedback_snapshot",),
    "ranking_proposal": ("feedback_snapshot", "query_split"),
    "full_retrieval_holdout": ("ranking_proposal",),
    "candidate_profile": ("ranking_proposal", "full_retrieval_holdout"),
}
"""The stage outputs each stage consumes (its asset inputs)."""


@dataclass(frozen=True)
class Gate:
    name: str
    """The asset check's name (an assertion: ``offline_gate_passed``)."""
    label: str
    """What a sentence calls it (``offline gate``): a refusal reads ``offline gate refused:
    no_improvement``, never by the check's name, which reads as if it had passed."""
    stage: str
    """The stage output it checks."""
    reads: tuple[str, ...]
    """Every stage output the verdict reads (the checked one first)."""
    description: str
    decide: Callable[[Evidence, MemoryClient | None], Verdict]
    """The ``prme_core`` verdict, from the evidence (and the store, for the gates that read the
    live pointer or the running pipeline; ``needs_store``)."""
    needs_store: bool = False

    def verdict(self, evidence: Evidence, client: MemoryClient | None = None) -> Verdict:
        missing = [name for name in self.reads if name not in evidence]
        if missing:
            raise KeyError(f"gate {self.name} reads {missing}, which this partition has not produced")
        if self.needs_store and client is None:
            raise ValueError(f"gate {self.name} reads the store; pass a client")
        return self.decide(evidence, client)

    def decided(self, evidence: Evidence, client: MemoryClient | None = None) -> Decided:
        """The verdict with the gate's name and label (what outcomes and refusals are written from)."""
        return Decided(self.name, self.label, self.verdict(evidence, client))


def _active_profile_id(client: MemoryClient, profile: Any) -> Any:
    active = client.get_active_ranking_profile(profile.owner, profile.scopes)
    return None if active is None else active.profile_id


GATE_TABLE: tuple[Gate, ...] = (
    Gate(
        "coverage_sufficient",
        "coverage gate",
        "query_split",
        ("query_split",),
        "Enough independent training and validation query groups.",
        lambda e, c: verdicts.coverage_verdict(e["query_split"]),
    ),
    Gate(
        "baseline_replay_exact",
        "baseline replay check",
        "query_split",
        ("query_split",),
        "Every judged candidate replays at unity to exactly its recorded score.",
        lambda e, c: verdicts.replay_verdict(e["query_split"]),
    ),
    Gate(
        "offline_gate_passed",
        "offline gate",
        "ranking_proposal",
        ("ranking_proposal",),
        "NDCG gain ≥ minimum over the validation and cross-fitted training groups, one-sided sign-flip "
        "p ≤ the bound, no pairwise-accuracy regression, the proposal not measurably worse on validation.",
        lambda e, c: verdicts.offline_gate_verdict(e["ranking_proposal"]),
    ),
    Gate(
        "holdout_gate_passed",
        "holdout gate",
        "full_retrieval_holdout",
        ("full_retrieval_holdout",),
        "Holdout NDCG gain ≥ minimum, sign-flip p ≤ the level this look may spend of the budget, no "
        "recall loss, bounded harm of regressions.",
        lambda e, c: verdicts.holdout_gate_verdict(e["full_retrieval_holdout"]),
    ),
    Gate(
        "holdout_memory_unchanged",
        "holdout memory check",
        "full_retrieval_holdout",
        ("full_retrieval_holdout",),
        "The owner's memory digest was identical before and after the pairs.",
        lambda e, c: verdicts.holdout_memory_verdict(e["full_retrieval_holdout"]),
    ),
    Gate(
        "profile_evidence_bound",
        "evidence binding check",
        "candidate_profile",
        ("candidate_profile", "ranking_proposal", "full_retrieval_holdout"),
        "The profile embeds exactly the gated reports and its holdout baseline still serves the scope set (not stale).",
        lambda e, c: profile_verdicts.evidence_bound_verdict(
            e["candidate_profile"],
            e["ranking_proposal"],
            e["full_retrieval_holdout"],
            _active_profile_id(c, e["candidate_profile"]),  # type: ignore[arg-type]
        ),
        needs_store=True,
    ),
    Gate(
        "runtime_compatible",
        "runtime compatibility check",
        "candidate_profile",
        ("candidate_profile",),
        "The recorded feature identity and base scoring match the running pipeline.",
        lambda e, c: profile_verdicts.runtime_verdict(
            e["candidate_profile"],
            running_features_sha256=c.running_feature_identity(),  # type: ignore[union-attr]
            running_scoring=c.settings.scoring,  # type: ignore[union-attr]
        ),
        needs_store=True,
    ),
)
"""Every gate, in pipeline order; a stage's decision gate before its integrity checks, so where both
say an expected "no" (no registered holdout queries) the decision names the outcome."""

GATES_BY_NAME: dict[str, Gate] = {g.name: g for g in GATE_TABLE}


def gate(name: str) -> Gate:
    return GATES_BY_NAME[name]


def gates_on(stage: str) -> tuple[Gate, ...]:
    """The gates that check ``stage``'s output, in table order."""
    return tuple(g for g in GATE_TABLE if g.stage == stage)


def guards(stage: str) -> tuple[Gate, ...]:
    """The gates a stage must see pass before it consumes its inputs: every gate on an input."""
    inputs = STAGE_INPUTS[stage]
    return tuple(g for g in GATE_TABLE if g.stage in inputs)


def guard_verdicts(stage: str, evidence: Evidence, client: MemoryClient | None = None) -> list[Decided]:
    """The verdict of every guard of ``stage``, re-derived from its inputs."""
    return [g.decided(evidence, client) for g in guards(stage)]


def checks_from(stage: str) -> tuple[tuple[str, str], ...]:
    """(asset, check) of every gate on ``stage`` and on the stages after it: the checks a run
    skips when ``stage`` declines."""
    first = STAGES.index(stage)
    return tuple((g.stage, g.name) for g in GATE_TABLE if STAGES.index(g.stage) >= first)


def _check_table() -> None:
    names = [g.name for g in GATE_TABLE]
    if len(set(names)) != len(names):
        raise RuntimeError(f"gate names repeat in GATE_TABLE: {names}")
    labels = [g.label for g in GATE_TABLE]
    if len(set(labels)) != len(labels) or not all(labels):
        raise RuntimeError(f"every gate needs its own label: {labels}")
    for g in GATE_TABLE:
        if g.stage not in STAGES or g.reads[0] != g.stage or not set(g.reads) <= set(STAGES):
            raise RuntimeError(f"gate {g.name}: its stage and reads must be stages, the checked one first")
        later = [s for s in g.reads if STAGES.index(s) > STAGES.index(g.stage)]
        if later:
            raise RuntimeError(f"gate {g.name} reads {later}, which come after the stage it checks")


_check_table()
