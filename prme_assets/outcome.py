"""How a learning run ends: a red run means something is wrong, an expected "no" is a green run.

``prme_core.learning.verdicts`` tells the two kinds of "no" apart, and the pipeline reports them
differently without letting either through:

- **Integrity failure** (receipts that do not replay, memory changed during the holdout, holdout
  queries overlapping training, evidence not bound, runtime incompatible): the gate is a failing
  blocking check of ERROR severity, so Dagster fails its step, does not execute the partition's
  downstream stages, and the run fails.
- **Expected "no"** (coverage short; offline or holdout decision ``insufficient_data`` or
  ``no_improvement``; no registered holdout queries): the gate is still a failing check
  (``passed=False``, the reason as its description, the numbers and ``needs`` in its metadata),
  with WARN severity: the UI shows a warning, not an error. Dagster 1.13 stops downstream steps
  only for failed blocking checks of ERROR severity (``execute_step.py``), and a missing check
  result never skips anything (``ActiveExecution._should_skip_step``). So the check stays
  blocking (the next stage waits for it), and that stage re-derives the same verdicts from its
  inputs (``refusal``) and declines: it yields no output (``output_required=False``), Dagster
  skips every step after it, and the run succeeds.

Enforcement is unchanged: ``candidate_profile`` creates nothing unless every verdict on its
evidence passed (it declines on an expected "no" and fails on an integrity failure, even when
materialized without its upstream checks), and the activation sensor still requires every gate's
newest evaluation of the partition to have passed (a WARN "no" is a failed evaluation) in the
run that materialized the profile.

A gate's decision is named by what it decided, never by its check's name (which states the
assertion, ``offline_gate_passed``, and reads as if it had passed): ``offline gate refused:
no_improvement``, ``holdout memory check failed: memory_changed``, or the decision itself when it
passed (``Decided.summary``).

The run's outcome is written in two places (``record_outcome``):

- **Three run tags** (shown on the run page, filterable in the runs list), beside Dagster's own
  ``dagster/partition``: ``prme/outcome`` (``passed`` — every gate so far passed and a candidate
  profile was created; activation is the sensor's call —, ``expected_no`` or
  ``integrity_failure``), ``prme/decision`` (the summary above) and ``prme/gain`` (the NDCG gain
  it judged, signed, 3 decimals; empty when there is none). All three are written each time.
- **An asset observation** of the step's asset for the run's partition (the stage that declined,
  the asset whose check failed, or ``candidate_profile`` when a profile was created), with every
  detail at full precision: ``outcome``, ``summary``, ``gate_check`` (the check to open),
  ``decision`` (``insufficient_data``, ``no_improvement``, ``improved_full_retrieval``… or the
  holdout's status), ``reason`` (the gate's one-line reason, the check's description),
  ``gain``, ``interval_low``/``interval_high`` (its 95% bootstrap interval), ``needs`` ("needs
  about N more judged queries", "no measurable gain", …), ``more_groups_needed`` and
  ``profile_id``. ``run_outcome`` reads it back.

An integrity failure after ``candidate_profile`` (``profile_evidence_bound``,
``runtime_compatible``) overwrites its ``passed``. The gate's check evaluation carries the same
facts as metadata (``prme_core.learning.verdicts``).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from prme_core.learning.verdicts import Verdict

PREFIX = "prme/"
OUTCOME_KEYS = (
    "outcome",
    "summary",
    "stopped_by",
    "decision",
    "reason",
    "gain",
    "interval_low",
    "interval_high",
    "needs",
    "more_groups_needed",
    "profile_id",
)
"""Every key of an outcome (``outcome_tags``, ``run_outcome``; ``stopped_by`` is the deciding
gate's check, empty when it passed)."""
RUN_TAG_KEYS = ("outcome", "decision", "gain")
"""The run tags (without ``PREFIX``) an outcome writes; the rest is in its observation."""
GAIN_FACTS = ("ndcg_gain", "validation_ndcg_gain")
RECORD_TAG = (PREFIX + "record", "learning_outcome")
"""Tags the outcome observation, so ``run_outcome`` finds it among the run's events."""


@dataclass(frozen=True)
class Decided:
    """A gate's verdict, with the gate's check name and what a sentence calls it."""

    gate: str
    """The check's name (``offline_gate_passed``)."""
    label: str
    """``offline gate``."""
    verdict: Verdict

    @property
    def decision(self) -> str | None:
        """The gate's decision (or the holdout's status), as its facts hold it."""
        facts = self.verdict.facts
        value = facts.get("decision", facts.get("status"))
        return None if value is None else str(value)

    @property
    def summary(self) -> str:
        return summary(self.label, self.verdict.outcome, self.decision)


def summary(label: str, outcome: str, decision: str | None) -> str:
    """``offline gate refused: no_improvement``, ``baseline replay check failed``, or the
    decision of a gate that passed (``improved_full_retrieval``)."""
    if outcome == "passed":
        return decision or f"{label} passed"
    verb = "refused" if outcome == "expected_no" else "failed"
    return f"{label} {verb}: {decision}" if decision else f"{label} {verb}"


def severity(verdict: Verdict) -> dg.AssetCheckSeverity:
    """WARN for an expected "no" (the run goes on, and stops cleanly at the next stage); ERROR
    otherwise, which fails a blocking check's step."""
    return dg.AssetCheckSeverity.WARN if verdict.outcome == "expected_no" else dg.AssetCheckSeverity.ERROR


def _text(value) -> str:
    if value is None:
        return ""
    return repr(float(value)) if isinstance(value, float) else str(value)


def outcome_record(decided: Decided, *, profile_id: str = "") -> dict[str, Any]:
    """Every key of the outcome ``decided`` stands for, at full precision (None: does not apply)."""
    f, verdict = decided.verdict.facts, decided.verdict
    return {
        "outcome": verdict.outcome,
        "summary": decided.summary,
        "stopped_by": None if verdict.passed else decided.gate,
        "decision": decided.decision,
        "reason": verdict.description,
        "gain": next((f[k] for k in GAIN_FACTS if f.get(k) is not None), None),
        "interval_low": f.get("interval_low"),
        "interval_high": f.get("interval_high"),
        "needs": f.get("needs"),
        "more_groups_needed": f.get("more_groups_needed"),
        "profile_id": profile_id or None,
    }


def outcome_tags(gate: str, verdict: Verdict, *, profile_id: str = "", label: str = "") -> dict[str, str]:
    """The outcome of ``verdict`` (by the check named ``gate``) as text under ``prme/`` keys: every
    key, empty when it does not apply, numbers exact (what the batched job keeps per partition)."""
    record = outcome_record(Decided(gate, label or gate, verdict), profile_id=profile_id)
    return {PREFIX + k: _text(record[k]) for k in OUTCOME_KEYS}


def run_tags(decided: Decided) -> dict[str, str]:
    """The few run tags of an outcome: its kind, its summary and the gain rounded to 3 decimals."""
    gain = outcome_record(decided)["gain"]
    return {
        PREFIX + "outcome": decided.verdict.outcome,
        PREFIX + "decision": decided.summary,
        PREFIX + "gain": "" if gain is None else f"{float(gain):+.3f}",
    }


def record_outcome(
    context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
    decided: Decided,
    *,
    profile_id: str = "",
) -> None:
    """Write the run's outcome: its run tags, and its details as an observation of the step's asset."""
    op = context.op_execution_context
    context.instance.add_run_tags(op.run_id, run_tags(decided))
    if isinstance(context, dg.AssetCheckExecutionContext):
        asset = context.check_specs[0].asset_key
    else:
        asset = context.asset_key
    record = outcome_record(decided, profile_id=profile_id)
    metadata = {("gate_check" if k == "stopped_by" else k): v for k, v in record.items() if v not in (None, "")}
    op.log_event(
        dg.AssetObservation(
            asset_key=asset,
            partition=op.partition_key if op.has_partition_key else None,
            description=decided.summary,
            metadata=metadata,
            tags=dict([RECORD_TAG]),
        )
    )


def refusal(context: dg.AssetExecutionContext, gates: Sequence[Decided]) -> Decided | None:
    """For a stage about to consume gated evidence, the gates' verdicts re-derived from its inputs.

    None when all passed. An integrity failure raises ``dg.Failure`` (the step and run fail). An
    expected "no" is recorded as the run's outcome, logged, and returned: the stage then yields
    no output, so every later stage of the partition is skipped and the run succeeds.
    """
    integrity = [d for d in gates if d.verdict.outcome == "integrity_failure"]
    if integrity:
        first = integrity[0]
        raise dg.Failure(
            description=f"{first.summary}: {first.verdict.description}",
            metadata={"gate_check": first.gate, "outcome": first.verdict.outcome},
        )
    declined = next((d for d in gates if d.verdict.outcome == "expected_no"), None)
    if declined is None:
        return None
    record_outcome(context, declined)
    needs = declined.verdict.facts.get("needs")
    context.log.info(
        f"{context.asset_key.to_user_string()} not computed: {declined.summary} (an expected outcome, "
        f"not an error): {declined.verdict.description}"
        + (f"; {needs}" if needs else "")
        + ". Later stages of this partition are skipped."
    )
    return declined


def run_outcome(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """A learning run's outcome (the newest outcome observation it logged) as text, keyed as
    ``OUTCOME_KEYS``, without empty values ({} when no gate decided: the run failed on an error,
    or ran no gate)."""
    for entry in reversed(instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION)):
        observation = entry.asset_observation
        if observation is None or (observation.tags or {}).get(RECORD_TAG[0]) != RECORD_TAG[1]:
            continue
        values = {k: v.value for k, v in observation.metadata.items()}
        values["stopped_by"] = values.pop("gate_check", None)
        return {k: _text(values[k]) for k in OUTCOME_KEYS if values.get(k) not in (None, "")}
    return {}
