"""What one learning run of a partition concluded, read back from the Dagster instance after the
run, and the table ``prme main`` prints.

The outcome is the run's outcome tags (``prme_assets.outcome``: which gate decided, its
decision, NDCG gain and interval, reason and what it needs, computed by ``prme_core``'s
verdicts and ``learning.power``). A run error is its first step failure that is not a gate
saying no, as one line; a run with an error, or whose gate found an integrity failure, failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import dagster as dg

from prme_assets.gate_table import GATES_BY_NAME
from prme_assets.outcome import run_outcome, summary

GATE_SAID_NO = "DagsterAssetCheckFailedError"
"""A blocking gate check failed: the gate's "no" (its kind is in the outcome tags), not an error."""


KEPT_ACTIVE = "kept active"
"""A gate said no to the new candidate, and the profile activated before stays active."""


@dataclass(frozen=True)
class PartitionResult:
    partition: str
    run_id: str
    outcome: dict[str, str] = field(default_factory=dict)
    """The run's outcome tags without the ``prme/`` prefix ({} when no gate decided)."""
    error: str | None = None
    """Why the run could not do its job (one line), or None."""
    activation: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome.get("outcome") == "passed"

    @property
    def failed(self) -> bool:
        return self.error is not None or self.outcome.get("outcome") == "integrity_failure"

    @property
    def active(self) -> bool:
        return self.activation in ("activated", "already active", KEPT_ACTIVE)

    def failure(self) -> str:
        """Why a failed run failed, in one line."""
        if self.error is not None:
            return self.error
        o = self.outcome
        return f"integrity failure at {o.get('stopped_by', 'a gate')}: {o.get('reason', o.get('decision', ''))}"

    def with_activation(self, activation: str, error: str | None = None) -> PartitionResult:
        return replace(self, activation=activation, error=error or self.error)

    def gain_text(self) -> str:
        """``+0.0123 [-0.0040, +0.0290]``, or ``—`` without a gain."""
        o = self.outcome
        if "gain" not in o:
            return "—"
        gain = f"{float(o['gain']):+.4f}"
        if "interval_low" in o and "interval_high" in o:
            return f"{gain} [{float(o['interval_low']):+.4f}, {float(o['interval_high']):+.4f}]"
        return gain

    def status(self) -> str:
        if self.error is not None:
            return "FAILED"
        kind = self.outcome.get("outcome")
        if kind == "integrity_failure":
            return "FAILED (integrity)"
        if kind == "passed":
            return self.activation or "gates passed"
        if kind == "expected_no":
            return "kept active profile" if self.activation == KEPT_ACTIVE else "not activated"
        return "no outcome"

    def summary(self) -> str:
        """One line, e.g. ``not activated: no_improvement, +0.0041 [-0.0030, +0.0110]; needs about 240
        more judged queries``."""
        if self.failed:
            return f"failed: {self.failure()}"
        o = self.outcome
        if not o:
            return "no outcome recorded"
        head = o.get("decision", o.get("outcome", ""))
        if "gain" in o:
            head += f", {self.gain_text()}"
        tail = o.get("needs") or o.get("reason", "")
        if o.get("outcome") == "passed":
            return f"{self.activation or 'gates passed'}: {head}"
        return f"{self.status()}: {head}" + (f"; {tail}" if tail else "")


def _error_line(error) -> str:  # error: dagster's SerializableErrorInfo
    """``Type: message`` of the first non-Dagster error in the chain (the user's exception), one line."""
    chain, item = [], error
    while item is not None:
        chain.append(item)
        item = item.cause or item.context
    chosen = next((e for e in chain if not e.cls_name.startswith("Dagster")), error)
    text = " ".join((chosen.message or "").split())
    head, sep, rest = text.partition(": ")
    if sep and head.endswith(chosen.cls_name):  # "prme_core.errors.StoreUnavailable: cannot open …"
        text = rest
    return f"{chosen.cls_name}: {text}"


def run_error(result: dg.ExecuteInProcessResult) -> str | None:
    """The run's first failure that is not a gate saying no (one line), or None."""
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            if error is None:
                return f"step {event.step_key} failed"
            if error.cls_name != GATE_SAID_NO:
                return f"{event.step_key}: {_error_line(error)}"
    if result.success:
        return None
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.RUN_FAILURE:
            error = event.job_failure_data.error
            if error is not None and error.cls_name != GATE_SAID_NO:
                return _error_line(error)
    return None


def read_outcome(instance: dg.DagsterInstance, result: dg.ExecuteInProcessResult, partition: str) -> PartitionResult:
    """The outcome of one learning run (its tags) and its error, if any."""
    outcome = run_outcome(instance, result.run_id)
    error = run_error(result)
    if error is None and not result.success and outcome.get("outcome") != "integrity_failure":
        error = f"the run failed without a gate deciding (run {result.run_id})"
    return PartitionResult(partition, result.run_id, outcome, error)


def _reason(outcome: dict[str, str]) -> str:
    """The gate's reason, with what the numbers show when it only names the decision."""
    reason = outcome.get("reason", "")
    if outcome.get("decision") != "no_improvement" or "gain" not in outcome:
        return reason
    if float(outcome["gain"]) <= 0.0:
        return f"{reason} (NDCG did not improve)"
    if "interval_low" in outcome and float(outcome["interval_low"]) <= 0.0:
        return f"{reason} (the 95% interval includes 0)"
    return reason


def decided_text(outcome: dict[str, str]) -> str:
    """What decided, named by what it decided (``offline gate refused: no_improvement``), never by
    the check's name, which reads as if it had passed."""
    if outcome.get("summary"):
        return outcome["summary"]
    gate = GATES_BY_NAME.get(outcome.get("stopped_by", ""))
    if gate is None:
        return outcome.get("decision", "—")
    return summary(gate.label, outcome.get("outcome", ""), outcome.get("decision"))


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split()) or "—"


def render_table(results: list[PartitionResult]) -> str:
    """The outcome table (Markdown) and a closing count."""
    lines = [
        "| partition | outcome | decision | NDCG gain [95% interval] | reason | what would change it |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        o = r.outcome
        decision = decided_text(o)
        if r.failed:
            reason, needed = r.failure(), "fix the cause and rerun prme main"
        elif r.passed:
            reason = o.get("reason", "")
            needed = r.activation if r.activation.startswith("not requested") else ""
        else:
            reason, needed = _reason(o), o.get("needs", "")
        lines.append(
            "| "
            + " | ".join(_cell(c) for c in (r.partition, r.status(), decision, r.gain_text(), reason, needed))
            + " |"
        )
    active = sum(r.active for r in results)
    failed = sum(r.failed for r in results)
    lines.append("")
    lines.append(
        f"{len(results)} learning targets; {active} with an active profile" + (f"; {failed} failed." if failed else ".")
    )
    return "\n".join(lines)
