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
  with WARN severity. Dagster 1.13 stops downstream steps only for failed blocking checks of
  ERROR severity (``execute_step.py``), and a missing check result never skips anything
  (``ActiveExecution._should_skip_step``). So the check stays blocking (the next stage waits for
  it), and that stage re-derives the same verdicts from its inputs (``refusal``) and declines: it
  yields no output (``output_required=False``), Dagster skips every step after it, checks that
  never ran read "Skipped" rather than "Execution failed", and the run succeeds.

Enforcement is unchanged: ``candidate_profile`` creates nothing unless every verdict on its
evidence passed (it declines on an expected "no" and fails on an integrity failure, even when
materialized without its upstream checks), and the activation sensor still requires every gate's
newest evaluation of the partition to have passed (a WARN "no" is a failed evaluation) in the
run that materialized the profile.

The run's outcome is written as run tags (shown on the run page, filterable in the runs list;
read them with ``run_outcome``). Every key is written each time, empty when it does not apply:

- ``prme/outcome``: ``passed`` (every gate so far passed and a candidate profile was created;
  activation is the sensor's call), ``expected_no`` or ``integrity_failure``; absent when no
  gate decided (the run failed on an error).
- ``prme/stopped_by``: the gate check that said no.
- ``prme/decision``: the gate's decision (``insufficient_data``, ``no_improvement``,
  ``improved_full_retrieval``…) or the holdout's status (``no_holdout_queries``,
  ``memory_changed``…).
- ``prme/reason``: the gate's one-line reason (the check's description).
- ``prme/gain``, ``prme/interval_low``, ``prme/interval_high``: the NDCG gain it judged
  (offline: validation groups; holdout: full retrieval) and its 95% bootstrap interval.
- ``prme/needs``: "needs about N more judged queries", "no measurable gain", …;
  ``prme/more_groups_needed``: that N, when there is one.
- ``prme/profile_id``: the candidate profile (outcome ``passed`` only).

Numbers are ``repr`` of the float (exact). An integrity failure after ``candidate_profile``
(``profile_evidence_bound``, ``runtime_compatible``) overwrites its ``passed``. The gate's check
evaluation carries the same facts as metadata: ``outcome``, ``reason``, ``decision``, the gains,
``interval_low``/``interval_high`` and, on an expected "no", ``needs``, ``more_groups_needed``,
``groups_for_power`` and ``observed_sd`` (``prme_core.learning.verdicts``).
"""

from collections.abc import Sequence

import dagster as dg

from prme_core.learning.verdicts import Verdict

PREFIX = "prme/"
OUTCOME_KEYS = (
    "outcome",
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
"""The run-tag keys (without ``PREFIX``) every outcome writes."""
GAIN_FACTS = ("ndcg_gain", "validation_ndcg_gain")


def severity(verdict: Verdict) -> dg.AssetCheckSeverity:
    """WARN for an expected "no" (the run goes on, and stops cleanly at the next stage); ERROR
    otherwise, which fails a blocking check's step."""
    return dg.AssetCheckSeverity.WARN if verdict.outcome == "expected_no" else dg.AssetCheckSeverity.ERROR


def _text(value) -> str:
    if value is None:
        return ""
    return repr(float(value)) if isinstance(value, float) else str(value)


def outcome_tags(gate: str, verdict: Verdict, *, profile_id: str = "") -> dict[str, str]:
    """The run tags of ``verdict`` (by the check named ``gate``): every key, empty when it does not apply."""
    f = verdict.facts
    values = {
        "outcome": verdict.outcome,
        "stopped_by": "" if verdict.passed else gate,
        "decision": f.get("decision", f.get("status")),
        "reason": verdict.description,
        "gain": next((f[k] for k in GAIN_FACTS if f.get(k) is not None), None),
        "interval_low": f.get("interval_low"),
        "interval_high": f.get("interval_high"),
        "needs": f.get("needs"),
        "more_groups_needed": f.get("more_groups_needed"),
        "profile_id": profile_id,
    }
    return {PREFIX + k: _text(values[k]) for k in OUTCOME_KEYS}


def record_outcome(
    context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
    gate: str,
    verdict: Verdict,
    *,
    profile_id: str = "",
) -> None:
    """Write the run's outcome tags (on the run being executed)."""
    context.instance.add_run_tags(context.run.run_id, outcome_tags(gate, verdict, profile_id=profile_id))


def refusal(context: dg.AssetExecutionContext, gates: Sequence[tuple[str, Verdict]]) -> Verdict | None:
    """For a stage about to consume gated evidence, the gates' verdicts re-derived from its inputs.

    None when all passed. An integrity failure raises ``dg.Failure`` (the step and run fail). An
    expected "no" is recorded as the run's outcome, logged, and returned: the stage then yields
    no output, so every later stage of the partition is skipped and the run succeeds.
    """
    integrity = [(name, v) for name, v in gates if v.outcome == "integrity_failure"]
    if integrity:
        name, verdict = integrity[0]
        raise dg.Failure(
            description=f"{name} did not pass: {verdict.description}",
            metadata={"stopped_by": name, "outcome": verdict.outcome},
        )
    declined = next(((name, v) for name, v in gates if v.outcome == "expected_no"), None)
    if declined is None:
        return None
    name, verdict = declined
    record_outcome(context, name, verdict)
    needs = verdict.facts.get("needs")
    context.log.info(
        f"{context.asset_key.to_user_string()} not computed: {name} said no (an expected outcome, "
        f"not an error): {verdict.description}"
        + (f"; {needs}" if needs else "")
        + ". Later stages of this partition are skipped."
    )
    return verdict


def run_outcome(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """A learning run's outcome tags without the prefix and without empty values ({} when no
    gate decided: the run failed on an error, or ran no gate)."""
    run = instance.get_run_by_id(run_id)
    tags = run.tags if run is not None else {}
    return {k: tags[PREFIX + k] for k in OUTCOME_KEYS if tags.get(PREFIX + k)}
