"""``prme status``: per learning target (owner|scopes), what the store serves and what the Dagster
instance last decided, without the UI or a server.

The active profile and since when come from the store (the profile pointer's newest change).
The last decision is the newest ``prme_learning_job`` run of the partition: its outcome
observation (``outcome.run_outcome``: decision, gain and interval, what it needs), its run tags
(``prme/outcome``, ``prme/decision``, ``prme/gain``) when the observation is missing, and its
end time. Runs of the batched job keep their per-partition outcomes in the batch's metadata and
are not read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from prme_assets.demo.outcome_table import GATE_SAID_NO, PartitionResult, decided_text
from prme_assets.outcome import PREFIX, RUN_TAG_KEYS, run_outcome
from prme_assets.partitions import LEARNING_TARGETS, decode_target

LEARNING_JOB = "prme_learning_job"
OUTCOME_WORDS = {"passed": "passed", "expected_no": "no", "integrity_failure": "FAILED (integrity)"}


@dataclass(frozen=True)
class PartitionStatus:
    partition: str
    active_profile: str | None
    active_since: datetime | None
    run_id: str | None
    run_status: str | None
    decided_at: datetime | None
    outcome: dict[str, str]
    error: str | None

    def last_decision(self) -> str:
        if self.run_id is None:
            return "—"
        if self.error is not None:
            return f"run {self.run_status}: {self.error}"
        if not self.outcome:
            return f"run {self.run_status}, no gate decided"
        kind = OUTCOME_WORDS.get(self.outcome.get("outcome", ""), self.outcome.get("outcome", ""))
        return f"{kind}: {decided_text(self.outcome)}"

    def gain_text(self) -> str:
        return PartitionResult(self.partition, self.run_id or "", self.outcome).gain_text()

    def what_would_change_it(self) -> str:
        o = self.outcome
        if self.run_id is None:
            return "no learning run yet: run prme main (or prme_learning_job for this partition)"
        if self.run_status in ("QUEUED", "NOT_STARTED", "STARTING", "STARTED"):
            return f"a learning run is in progress ({self.run_status})"
        if self.error is not None or o.get("outcome") == "integrity_failure":
            return "fix the cause (the run's page in the Dagster UI) and run learning again"
        if o.get("outcome") == "passed":
            if self.active_profile is not None and self.active_profile == o.get("profile_id"):
                return "a newer profile that beats this one on the holdout"
            return "its activation: the activation sensor (or prme main) activates a profile whose gates all passed"
        needs = o.get("needs") or "more judged queries that agree"
        if self.active_profile is not None:
            return f"the active profile stays; a candidate that beats it would replace it (this one: {needs})"
        return needs


def _time(timestamp: float | None) -> datetime | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, tz=UTC)


def _stored_run_error(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """The first step failure that is not a gate saying no (``Type: message``, one line)."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = entry.dagster_event
        error = event.step_failure_data.error if event is not None else None
        if error is None:
            return f"step {event.step_key if event else '?'} failed"
        if error.cls_name != GATE_SAID_NO:
            text = " ".join((error.message or "").split())
            return f"{event.step_key}: {text[:200]}"
    return None


def _last_run(instance: dg.DagsterInstance, partition: str) -> Any:
    records = instance.get_run_records(
        filters=dg.RunsFilter(job_name=LEARNING_JOB, tags={"dagster/partition": partition}), limit=1
    )
    return records[0] if records else None


def partition_status(instance: dg.DagsterInstance, client: Any, partition: str) -> PartitionStatus:
    owner, scopes = decode_target(partition)
    active = client.get_active_ranking_profile(owner, scopes)
    since = None
    if active is not None:
        newest = client.ranking_profile_history(owner, scopes, limit=1)
        since = newest[0].changed_at if newest else None
    record = _last_run(instance, partition)
    if record is None:
        return PartitionStatus(
            partition, None if active is None else str(active.profile_id), since, None, None, None, {}, None
        )
    run = record.dagster_run
    outcome = run_outcome(instance, run.run_id)
    if not outcome:  # an observation can be missing (a run from before it was written): the tags
        outcome = {k: run.tags[PREFIX + k] for k in RUN_TAG_KEYS if run.tags.get(PREFIX + k)}
        if "decision" in outcome:
            outcome["summary"] = outcome["decision"]
    status = run.status.value
    error = _stored_run_error(instance, run.run_id) if status == "FAILURE" else None
    if status == "FAILURE" and error is None and outcome.get("outcome") != "integrity_failure":
        error = "the run failed without a gate deciding"
    return PartitionStatus(
        partition,
        None if active is None else str(active.profile_id),
        since,
        run.run_id,
        status,
        _time(record.end_time or record.start_time) or record.create_timestamp,
        outcome,
        error,
    )


def learning_targets(instance: dg.DagsterInstance) -> list[str]:
    return sorted(instance.get_dynamic_partitions(LEARNING_TARGETS.name))


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split()) or "—"


def render_status(rows: list[PartitionStatus]) -> str:
    lines = [
        "| partition | active profile | active since | last decision | NDCG gain [95% interval] | decided at "
        "| what would change it |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = (
            r.partition,
            r.active_profile or "none",
            _when(r.active_since),
            r.last_decision(),
            r.gain_text(),
            _when(r.decided_at),
            r.what_would_change_it(),
        )
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    active = sum(r.active_profile is not None for r in rows)
    lines.append("")
    lines.append(f"{len(rows)} learning targets; {active} with an active profile.")
    return "\n".join(lines)
