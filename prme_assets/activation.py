"""Scoped activation: an op that re-verifies and activates, launched only by a sensor that saw
every gate of that exact partition and materialization pass; operator jobs to deactivate and
roll back.

The three jobs are partitioned like the learning assets: each run is for one partition (the
sensor requests it with ``partition_key``; an operator picks it in the launchpad), so the run
carries ``dagster/partition`` and the partition's runs list its pointer changes. Each pointer
change is a materialization of ``active_ranking_profile`` for that partition (what serves now,
what served before, the pointer's version, the active profile's evidence and the run that
learned it, profiles as links to the HTTP API); a rerun that changed nothing is an observation
of it. The asset is reported by these jobs, never computed by a learning run.

The activation change id derives from the profile id, so a rerun of the job is an exact retry:
it records nothing and says so. A profile that served a partition before and was deactivated or
rolled back away since is never activated again by this job or its sensor (an operator's change
stands until an operator rolls back to it). Runs for one partition are serialized by the
``prme/activation_target`` run-tag limit in ``dagster.yaml``; the pointer change itself is a
compare-and-set in the domain store, so even concurrent ad-hoc runs cannot both win.
"""

import bisect
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from prme_assets.check_records import latest_checks, latest_materialization, materialization_of
from prme_assets.checks import GATE_CHECKS
from prme_assets.metadata import BASE_SCORING, profile_link, stage_link
from prme_assets.partitions import LEARNING_TARGETS, decode_target
from prme_assets.resources import STORE_POOL, PrmeStoreResource, api_url_from_env
from prme_assets.stage import GROUP
from prme_core.engine import MemoryClient
from prme_core.errors import ReactivationRefused
from prme_core.learning.stages import activation_change_id
from prme_core.profiles import registry as profiles
from prme_core.profiles.model import RankingProfileState
from prme_core.profiles.verdicts import runtime_verdict

ACTIVATION_TAG = "prme/activation_target"
ACTIVE_PROFILE = "active_ranking_profile"

active_ranking_profile = dg.AssetSpec(
    ACTIVE_PROFILE,
    deps=["candidate_profile"],
    partitions_def=LEARNING_TARGETS,
    group_name=GROUP,
    kinds={"python"},
    description="The ranking profile that serves each (owner, scope set) now, or base scoring. "
    "Reported by activate_profile_job, deactivate_profile_job and rollback_profile_job: a "
    "materialization per pointer change (active and previous profile, pointer version, the "
    "active profile's evidence and the run that learned it); an observation when a rerun changed "
    "nothing. Never computed by a learning run.",
)


def _pointer_job(op: dg.OpDefinition, kind: str, description: str) -> dg.JobDefinition:
    """The partitioned job that runs one pointer op (``<name>_op`` → ``<name>_job``)."""

    @dg.job(
        name=op.name.removesuffix("_op") + "_job",
        partitions_def=LEARNING_TARGETS,
        tags={"prme/kind": kind},
        description=description,
    )
    def pointer_job() -> None:
        op()

    return pointer_job


class ActivationConfig(dg.Config):
    profile_id: str
    partition_key: str = ""
    """Empty: the run's partition. A run launched without a partition acts on this one."""


def _partition(context: dg.OpExecutionContext, configured: str) -> str:
    """The partition a pointer job acts on: the run's (the sensor's request, the launchpad's
    choice), else the configured key for a run launched without one; the two must agree."""
    run = context.partition_key if context.has_partition_key else ""
    if run and configured and run != configured:
        raise dg.Failure(f"this run is for partition {run!r}, but its config names {configured!r}")
    if not (run or configured):
        raise dg.Failure("no partition: launch the run for one partition (owner::scopes)")
    return run or configured


def _text_id(profile_id: Any) -> str:
    return str(profile_id) if profile_id else BASE_SCORING


def _evidence(
    instance: dg.DagsterInstance, client: MemoryClient, partition: str, owner: str, profile_id: Any
) -> dict[str, Any]:
    """The active profile's decision evidence: its gains and report checksums, and a link to the
    run whose gates allowed it (the candidate_profile materialization that created it)."""
    status = client.get_ranking_profile(str(profile_id), owner)
    if status is None:
        return {}
    profile = status.profile
    learned = materialization_of(instance, "candidate_profile", partition, key="profile_id", value=str(profile_id))
    return {
        "offline_gain": profile.proposal.validation_ndcg_gain,
        "holdout_gain": profile.holdout.ndcg_gain,
        "holdout_groups": profile.holdout.coverage.query_groups,
        "proposal_input_checksum": profile.proposal.input_checksum,
        "holdout_input_checksum": profile.holdout.input_checksum,
        "profile_created_at": profile.created_at.isoformat(),
        "candidate_profile": stage_link("candidate_profile"),
        **({"learned_in_run": dg.MetadataValue.dagster_run(learned.run_id)} if learned else {}),
    }


def pointer_event(
    context: dg.OpExecutionContext, client: MemoryClient, partition: str, state: RankingProfileState
) -> dg.AssetMaterialization | dg.AssetObservation:
    """``active_ranking_profile`` of the partition after a pointer change: a materialization, or
    an observation of the pointer as it is when the change was already recorded (nothing changed)."""
    owner, scopes = decode_target(partition)
    in_force = state.superseded_by or state
    api_url = api_url_from_env()
    metadata: dict[str, Any] = {
        "active_profile_id": _text_id(in_force.active_profile_id),
        "active_profile": profile_link(in_force.active_profile_id, api_url),
        "previous_profile_id": _text_id(in_force.previous_profile_id),
        "previous_profile": profile_link(in_force.previous_profile_id, api_url),
        "action": in_force.action,
        "change_id": str(in_force.change_id),
        "changed_at": in_force.changed_at.isoformat(),
        "pointer_version": len(client.ranking_profile_history(owner, scopes)),
    }
    if in_force.active_profile_id:
        metadata.update(_evidence(context.instance, client, partition, owner, in_force.active_profile_id))
    serving = _text_id(in_force.active_profile_id)
    if state.replayed:
        return dg.AssetObservation(
            ACTIVE_PROFILE,
            partition=partition,
            description=f"already recorded, nothing changed: {serving} serves",
            metadata={"no_op_rerun": True, **metadata},
        )
    return dg.AssetMaterialization(
        ACTIVE_PROFILE, partition=partition, description=f"{in_force.action}: {serving} serves", metadata=metadata
    )


def _pointer_change_metadata(
    context: dg.OpExecutionContext, state: RankingProfileState, *, done: str
) -> dict[str, str | bool]:
    """What a pointer change did, for the op's log and step metadata (activation and the operator
    jobs alike): a retry with a recorded change id changes nothing and says so, reporting the
    pointer as it is now."""
    in_force = state.superseded_by or state
    active = str(in_force.active_profile_id) if in_force.active_profile_id else "base scoring"
    if state.replayed:
        context.log.info(
            f"change {state.change_id} was already recorded at {state.changed_at.isoformat()}; "
            f"nothing changed; the active profile is {active}"
        )
    else:
        context.log.info(f"{done.replace('_', ' ')} (change {state.change_id}); the active profile is {active}")
    return {
        "outcome": "already_recorded" if state.replayed else done,
        "no_op_rerun": state.replayed,
        "change_id": str(state.change_id),
        "changed_at": state.changed_at.isoformat(),
        "previous_profile_id": str(state.previous_profile_id) if state.previous_profile_id else "base scoring",
        "active_profile_id": active,
    }


@dg.op(
    pool=STORE_POOL,
    description="Re-verify a candidate profile's evidence, runtime compatibility and the "
    "current pointer, then activate it (deterministic change id).",
)
def activate_profile_op(
    context: dg.OpExecutionContext, config: ActivationConfig, prme_store: PrmeStoreResource
) -> Iterator[dg.AssetMaterialization | dg.AssetObservation | dg.Output[dict]]:
    """Activate a sensor-approved profile: idempotent for retries of the same decision, and never
    undoing an operator's change.

    A re-run finds its change already recorded and reports ``outcome=already_recorded`` with the
    profile active now; nothing is written. If the profile served this partition before and was
    deactivated or rolled back away since, the run fails with that reason and activates nothing:
    serving it again is a deliberate ``rollback_profile_job`` with its profile id.
    """
    partition = _partition(context, config.partition_key)
    owner, scopes = decode_target(partition)
    with prme_store.client() as client:
        status = client.get_ranking_profile(config.profile_id, owner)  # loading re-validates the evidence
        if status is None:
            raise dg.Failure(f"profile {config.profile_id} does not exist for {owner!r}")
        profile = status.profile
        if profile.scopes != scopes:
            raise dg.Failure(f"profile {profile.profile_id} belongs to {'+'.join(profile.scopes)}, not this partition")
        verdict = runtime_verdict(
            profile, running_features_sha256=client.running_feature_identity(), running_scoring=client.settings.scoring
        )
        if not verdict.passed:
            raise dg.Failure(verdict.description)
        try:
            state = client.activate_ranking_profile(
                profile.profile_id, owner=owner, reactivate=False, change_id=activation_change_id(profile.profile_id)
            )
        except ReactivationRefused as exc:
            raise dg.Failure(
                description=str(exc), metadata={"profile_id": str(profile.profile_id), "outcome": "refused"}
            ) from None
        event = pointer_event(context, client, partition, state)
    yield event
    yield dg.Output(
        {"profile_id": str(profile.profile_id), "change_id": str(state.change_id)},
        metadata={"profile_id": str(profile.profile_id), **_pointer_change_metadata(context, state, done="activated")},
    )


activate_profile_job = _pointer_job(
    activate_profile_op, "activation", "Activate one candidate profile of one partition (launched by the sensor)."
)


@dg.sensor(
    job=activate_profile_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Requests an activation only when every gate of the newest candidate_profile "
    "materialization of a partition passed in that same run (at most 250 partitions a tick; past "
    "that, ticks take turns).",
)
def profile_activation_sensor(context: dg.SensorEvaluationContext, prme_store: PrmeStoreResource):
    requests, skipped = [], []
    window = partitions_to_examine(context.instance.get_dynamic_partitions(LEARNING_TARGETS.name), context.cursor)
    if window:
        context.update_cursor(window[-1])
    for partition in window:
        decision = activation_request(context.instance, partition, prme_store)
        if isinstance(decision, dg.RunRequest):
            requests.append(decision)
        else:
            skipped.append(f"{partition}: {decision}")
    if requests:
        return requests
    return dg.SkipReason("; ".join(skipped) or "no learning targets yet")


ACTIVATION_TICK_LIMIT = 250
"""Partitions one tick examines. Each costs a few queries (about 45 ms on PostgreSQL at a load
average of 6 on 2 cores, ``benchmarks/results/scale/``), and a sensor tick must end within
Dagster's 60 s: past this many targets the ticks take turns, in key order from the cursor."""


def partitions_to_examine(partitions: list[str], cursor: str | None) -> list[str]:
    """At most ``ACTIVATION_TICK_LIMIT`` partitions, in key order, starting after ``cursor`` (the
    last one the previous tick examined) and wrapping around: every partition is examined at
    least once every ``ceil(N / ACTIVATION_TICK_LIMIT)`` ticks."""
    ordered = sorted(partitions)
    start = bisect.bisect_right(ordered, cursor or "")
    return (ordered[start:] + ordered[:start])[:ACTIVATION_TICK_LIMIT]


def _active_profile_id(prme_store: PrmeStoreResource, owner: str, scopes: tuple[str, ...]) -> str | None:
    with prme_store.client() as client:
        active = client.get_active_ranking_profile(owner, scopes)
    return None if active is None else str(active.profile_id)


def activation_request(
    instance: dg.DagsterInstance, partition: str, prme_store: PrmeStoreResource
) -> dg.RunRequest | str:
    """A run request for the partition, or the reason there is none."""
    materialization = latest_materialization(instance, "candidate_profile", partition)
    if materialization is None:
        return "no candidate profile"
    checks = latest_checks(instance, GATE_CHECKS, partition)
    failed = [c.name for c in checks if not c.passed or c.run_id != materialization.run_id]
    profile_id = materialization.metadata.get("profile_id")
    owner, scopes = decode_target(partition)
    if failed:
        later = any(c.run_id is not None and c.run_id != materialization.run_id for c in checks)
        if later and profile_id is not None and _active_profile_id(prme_store, owner, scopes) == profile_id:
            # the newest candidate already serves: the gates that did not pass are a later run's proposal's
            return f"already active; no later proposal passed every gate (not passed: {', '.join(failed)})"
        return f"gates not passed for the newest candidate profile: {', '.join(failed)}"
    with prme_store.client() as client:
        active = client.get_active_ranking_profile(owner, scopes)
        status = client.get_ranking_profile(profile_id, owner)
        served = None if status is None else profiles.last_served(client.store, owner, scopes, profile_id)
    active_id = None if active is None else str(active.profile_id)
    if active_id == profile_id:
        return "already active"
    if status is None:
        return f"profile {profile_id} is missing from the store"
    if served is not None:
        return (
            f"profile {profile_id} served before ({served.action} change {served.change_id}) and was deactivated "
            "or rolled back away since; serving it again is an operator's rollback_profile_job, not a sensor run"
        )
    baseline = status.profile.baseline_profile_id
    if active_id != (None if baseline is None else str(baseline)):
        return (
            f"stale baseline: {active_id or 'base scoring'} serves now, the holdout ran against "
            f"{baseline or 'base scoring'}; re-run the learning job"
        )
    return dg.RunRequest(
        run_key=f"activate:{partition}:{profile_id}:{materialization.storage_id}",
        run_config={"ops": {"activate_profile_op": {"config": {"partition_key": partition, "profile_id": profile_id}}}},
        tags={ACTIVATION_TAG: partition},
        partition_key=partition,
    )


class DeactivationConfig(dg.Config):
    partition_key: str = ""
    """Empty: the run's partition."""
    expected_profile_id: str = ""
    """Fail unless this profile is the active one (empty: don't check)."""
    change_id: str = ""
    """A UUID making retries exact no-ops (empty: a new change)."""


def _operator_change(
    context: dg.OpExecutionContext,
    config: DeactivationConfig,
    prme_store: PrmeStoreResource,
    change: Callable[..., RankingProfileState],
    *,
    done: str,
) -> Iterator[dg.AssetMaterialization | dg.AssetObservation | dg.Output[None]]:
    """An operator's pointer change on the configured partition, ``change(client, owner=, scopes=,
    change_id=[, expected_profile_id=])``, reported as every pointer change is."""
    partition = _partition(context, config.partition_key)
    owner, scopes = decode_target(partition)
    kwargs = {"expected_profile_id": config.expected_profile_id} if config.expected_profile_id else {}
    with prme_store.client() as client:
        state = change(client, owner=owner, scopes=scopes, change_id=config.change_id or None, **kwargs)
        event = pointer_event(context, client, partition, state)
    yield event
    yield dg.Output(None, metadata=_pointer_change_metadata(context, state, done=done))


@dg.op(pool=STORE_POOL, description="Return a partition to base scoring (a recorded state).")
def deactivate_profile_op(
    context: dg.OpExecutionContext, config: DeactivationConfig, prme_store: PrmeStoreResource
) -> Iterator[dg.AssetMaterialization | dg.AssetObservation | dg.Output[None]]:
    yield from _operator_change(
        context, config, prme_store, MemoryClient.deactivate_ranking_profile, done="deactivated"
    )


deactivate_profile_job = _pointer_job(
    deactivate_profile_op, "deactivation", "Operator job: deactivate the profile of one partition."
)


class RollbackConfig(DeactivationConfig):
    profile_id: str = ""
    """An earlier profile of this partition; empty rolls back to base scoring."""


@dg.op(pool=STORE_POOL, description="Point a partition at an earlier profile, or at base scoring.")
def rollback_profile_op(
    context: dg.OpExecutionContext, config: RollbackConfig, prme_store: PrmeStoreResource
) -> Iterator[dg.AssetMaterialization | dg.AssetObservation | dg.Output[None]]:
    def rollback(client: MemoryClient, **kwargs: Any) -> RankingProfileState:
        return client.rollback_ranking_profile(config.profile_id or None, **kwargs)

    yield from _operator_change(context, config, prme_store, rollback, done="rolled_back")


rollback_profile_job = _pointer_job(rollback_profile_op, "rollback", "Operator job: roll one partition back.")
