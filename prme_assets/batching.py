"""Batched learning: one run learns many (owner, scope set) partitions, each exactly as strictly as
a run of its own.

``prme_learning_batch_job`` is one op over a list of partition keys: the run process, the step
process and their imports are paid once per batch instead of once per partition (in the scale
benchmark a partition cost about 1.4 s inside a batch and 9 to 10 s as a twelve-step run of its
own, ``benchmarks/results/scale/``). For each partition the op runs the same stage functions as the five assets
(``snapshot_output`` … ``profile_output``), stores each output through the same evidence store,
and records what the asset job records for that partition: a materialization of each stage and
one evaluation of each gate of ``gate_table.GATE_TABLE``, partitioned, with the gate's own severity and
metadata (``checks.gate_result``). A partition stops at its first stage whose gates did not all
pass, as the asset job's blocking checks stop it, and the next partition starts from scratch:

- an expected "no" (WARN) of one partition is that partition's outcome; the others go on;
- an integrity failure (ERROR) or a typed error of one partition stops that partition only; the
  rest of the batch is learned, then the step fails naming the partitions, so the run is red;
- an unexpected exception (a bug, the store going away) fails the step at once.

The activation sensor is unchanged: for each partition it requires every gate of
``checks.GATES`` to have passed in the run of that partition's newest ``candidate_profile``
materialization, which for a batch is the batch's run, evaluated for that partition.

Why not the asset job over a partition range (``BackfillPolicy.multi_run``): a range run executes
each stage once for all its partitions, so one partition's ERROR gate fails the step and stops
every other partition of the range, every partition of the range is materialized by every stage
even where its gates said no, and a range of dynamic partitions is a contiguous run of keys in
insertion order rather than the partitions whose feedback changed.
"""

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_IS_USER_PROVIDED_TAG, DATA_VERSION_TAG

from prme_assets.check_records import check_evaluation
from prme_assets.checks import GATES, gate_result
from prme_assets.evidence_io import store_evidence
from prme_assets.gate_table import Evidence, gate
from prme_assets.holdout import holdout_output
from prme_assets.metadata import markdown_table
from prme_assets.outcome import PREFIX, Decided, outcome_tags
from prme_assets.partitions import LEARNING_TARGETS, decode_target
from prme_assets.profile import profile_output
from prme_assets.proposal import proposal_output
from prme_assets.resources import STORE_POOL, LearningPolicyResource, PrmeStoreResource
from prme_assets.snapshot import snapshot_output
from prme_assets.split import split_output
from prme_core.engine import MemoryClient
from prme_core.errors import InvalidInput, PrmeError
from prme_core.learning.snapshot import load_snapshot

BATCH_JOB = "prme_learning_batch_job"
BATCH_OP = "learn_partitions"
BATCH_KIND = "learning_batch"
"""The ``prme/kind`` tag of batch runs."""

_GATE_SPECS: dict[str, list[dg.AssetCheckSpec]] = {}
for _gate in GATES:
    for _spec in _gate.check_specs:
        _GATE_SPECS.setdefault(_spec.asset_key.to_user_string(), []).append(_spec)


@dataclass
class PartitionOutcome:
    """How one partition of a batch ended: ``outcome`` is ``passed``, ``expected_no``,
    ``integrity_failure`` (as the asset job's run tags) or ``error`` (a typed error stopped it)."""

    partition: str
    facts: dict[str, str] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        return self.facts.get("outcome", "")

    @classmethod
    def of(cls, partition: str, decided: Decided, profile_id: str = "") -> "PartitionOutcome":
        tags = outcome_tags(decided.gate, decided.verdict, profile_id=profile_id, label=decided.label)
        return cls(partition, {k.removeprefix(PREFIX): v for k, v in tags.items() if v})


@dataclass(frozen=True)
class _Stop:
    """The gate that stopped a partition, and its verdict."""

    decided: Decided


class LearningBatchConfig(dg.Config):
    partition_keys: list[str]
    """The partitions to learn, in order; each must be a registered learning target."""


def _materialization(store, run_id: str, asset: str, partition: str, output: dg.Output) -> dg.AssetMaterialization:
    evidence = store_evidence(store, dg.AssetKey(asset), partition, run_id, output.value)
    tags = {}
    if output.data_version is not None:  # as Dagster tags a user-provided data version
        tags = {DATA_VERSION_TAG: output.data_version.value, DATA_VERSION_IS_USER_PROVIDED_TAG: "true"}
    return dg.AssetMaterialization(
        asset_key=asset, partition=partition, metadata={**output.metadata, **evidence}, tags=tags
    )


def _gates(
    instance: dg.DagsterInstance, client: MemoryClient, asset: str, partition: str, evidence: Evidence
) -> Iterator[dg.AssetCheckEvaluation | _Stop]:
    """Evaluate every gate on ``asset`` (all of them, as Dagster runs every check of a stage), then
    yield the gate that stops the partition, if any: the first integrity failure, else the first
    expected "no"."""
    decided = []
    for spec in _GATE_SPECS.get(asset, []):
        d = gate(spec.name).decided(evidence, client)
        decided.append(d)
        yield check_evaluation(instance, spec.key, partition, gate_result(d), blocking=spec.blocking)
    for kind in ("integrity_failure", "expected_no"):
        stop = next((_Stop(d) for d in decided if d.verdict.outcome == kind), None)
        if stop is not None:
            yield stop
            return


def learn_partition(
    context: dg.OpExecutionContext,
    client: MemoryClient,
    partition: str,
    learning_policy: LearningPolicyResource,
) -> Iterator[Any]:
    """The five stages and seven gates of one partition, as events; the last item yielded is its
    ``PartitionOutcome``."""
    run_id, instance, store = context.run_id, context.instance, client.store
    evidence: Evidence = {}
    snapshot = None
    stages: list[tuple[str, Callable[[], dg.Output]]] = [
        ("feedback_snapshot", lambda: snapshot_output(client, partition, learning_policy)),
        ("query_split", lambda: split_output(partition, snapshot, learning_policy)),
        (
            "ranking_proposal",
            lambda: proposal_output(client, partition, snapshot, evidence["query_split"], learning_policy),
        ),
        (
            "full_retrieval_holdout",
            lambda: holdout_output(client, evidence["ranking_proposal"], learning_policy.holdout_config()),
        ),
        (
            "candidate_profile",
            lambda: profile_output(client, evidence["ranking_proposal"], evidence["full_retrieval_holdout"]),
        ),
    ]
    for asset, compute in stages:
        output = compute()
        evidence[asset] = output.value
        yield _materialization(store, run_id, asset, partition, output)
        if asset == "feedback_snapshot":
            snapshot = load_snapshot(store, output.value)  # verified once, read by split and proposal
        for item in _gates(instance, client, asset, partition, evidence):
            if isinstance(item, _Stop):
                yield PartitionOutcome.of(partition, item.decided)
                return
            yield item
    profile_id = str(evidence["candidate_profile"].profile_id)
    holdout = gate("holdout_gate_passed").decided(evidence, client)
    yield PartitionOutcome.of(partition, holdout, profile_id=profile_id)


def _checked_keys(instance: dg.DagsterInstance, keys: Sequence[str]) -> list[str]:
    duplicated = sorted(k for k, n in Counter(keys).items() if n > 1)
    if duplicated:
        raise InvalidInput("partition_keys", f"each partition at most once per batch; repeated: {duplicated[:5]}")
    for key in keys:
        decode_target(key)  # a key this codec did not produce names itself
    unknown = [k for k in keys if not instance.has_dynamic_partition(LEARNING_TARGETS.name, k)]
    if unknown:
        raise InvalidInput(
            "partition_keys", f"{len(unknown)} are not learning targets of this instance, e.g. {unknown[:3]}"
        )
    return list(keys)


OUTCOME_KINDS = ("passed", "expected_no", "integrity_failure", "error")


def _gain(facts: dict[str, str]) -> str:
    return f"{float(facts['gain']):+.3f}" if facts.get("gain") else ""


def _summary(outcomes: list[PartitionOutcome]) -> dict[str, Any]:
    counts = Counter(o.outcome for o in outcomes)
    rows = [
        [o.partition, o.outcome, o.facts.get("summary") or o.facts.get("reason", ""), _gain(o.facts)] for o in outcomes
    ]
    return {
        "partitions": len(outcomes),
        **{kind: counts.get(kind, 0) for kind in OUTCOME_KINDS},
        "outcomes": markdown_table(["partition", "outcome", "decision", "gain"], rows),
        "outcome_facts": dg.MetadataValue.json({o.partition: o.facts for o in outcomes}),
    }


def batch_tags(summary: dict[str, Any]) -> dict[str, str]:
    """A batch run's two result tags: how many partitions it learned, and how they ended
    (``1 passed, 2 expected_no, 1 integrity_failure``); the table is in the step's metadata."""
    ended = ", ".join(f"{summary[kind]} {kind}" for kind in OUTCOME_KINDS if summary[kind])
    return {"prme/batch_partitions": str(summary["partitions"]), "prme/batch_outcome": ended or "none"}


@dg.op(
    name=BATCH_OP,
    pool=STORE_POOL,
    out=dg.Out(dg.Nothing),
    description="Learn each listed partition through the five stages and seven gates, one after the "
    "other, recording its materializations and gate evaluations as the asset job does.",
)
def learn_partitions(
    context: dg.OpExecutionContext,
    config: LearningBatchConfig,
    prme_store: PrmeStoreResource,
    learning_policy: LearningPolicyResource,
):
    keys = _checked_keys(context.instance, config.partition_keys)
    outcomes: list[PartitionOutcome] = []
    for partition in keys:
        try:
            with prme_store.client() as client:  # opened per partition: a DuckDB file is not held between them
                for item in learn_partition(context, client, partition, learning_policy):
                    if isinstance(item, PartitionOutcome):
                        outcomes.append(item)
                    else:
                        yield item
        except PrmeError as exc:  # a typed error stops this partition only
            context.log.error(f"{partition}: {type(exc).__name__}: {exc}")
            outcomes.append(PartitionOutcome(partition, {"outcome": "error", "reason": f"{type(exc).__name__}: {exc}"}))
        last = outcomes[-1]
        context.log.info(
            f"{partition}: {last.outcome}" + (f" ({last.facts['summary']})" if last.facts.get("stopped_by") else "")
        )
    summary = _summary(outcomes)
    context.instance.add_run_tags(context.run_id, batch_tags(summary))
    failed = [o for o in outcomes if o.outcome in ("integrity_failure", "error")]
    if failed:
        raise dg.Failure(
            description=f"{len(failed)} of {len(outcomes)} partitions failed (the others were learned): "
            + ", ".join(f"{o.partition} ({o.facts.get('summary') or o.facts.get('reason', '')})" for o in failed[:10]),
            metadata=summary,
        )
    yield dg.Output(None, metadata=summary)


@dg.job(
    name=BATCH_JOB,
    tags={"prme/kind": BATCH_KIND},
    description="Learn a batch of partitions in one run (requested by the nightly schedule); each "
    "partition's gates are recorded and enforced on their own.",
)
def learning_batch_job():
    learn_partitions()


def batch_run_config(partition_keys: Sequence[str]) -> dict:
    return {"ops": {BATCH_OP: {"config": {"partition_keys": list(partition_keys)}}}}


def batch_partition_keys(run: dg.DagsterRun) -> list[str]:
    """The partitions a batch run learns (from its run config)."""
    return list(run.run_config.get("ops", {}).get(BATCH_OP, {}).get("config", {}).get("partition_keys", []))


IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def partitions_in_flight(instance: dg.DagsterInstance, asset_job: str) -> set[str]:
    """Partitions that a queued or running learning run will learn: those of batch runs, and the
    partition of single runs of ``asset_job``."""
    busy: set[str] = set()
    for run in instance.get_runs(filters=dg.RunsFilter(job_name=BATCH_JOB, statuses=IN_FLIGHT)):
        busy.update(batch_partition_keys(run))
    for run in instance.get_runs(filters=dg.RunsFilter(job_name=asset_job, statuses=IN_FLIGHT)):
        if run.tags.get("dagster/partition"):
            busy.add(run.tags["dagster/partition"])
    return busy


def batches(items: Sequence[Any], size: int) -> list[list[Any]]:
    """``items`` in consecutive batches of at most ``size`` (order kept)."""
    if size < 1:
        raise InvalidInput("batch_size", f"must be at least 1, not {size}")
    return [list(items[i : i + size]) for i in range(0, len(items), size)]
