"""Scoped activation: an op that re-verifies and activates, launched only by a sensor that saw
every gate of that exact partition and materialization pass; operator jobs to deactivate and
roll back.

The activation change id derives from the profile id, so a rerun of the job is an exact retry:
it records nothing and says so. A profile that served a partition before and was deactivated or
rolled back away since is never activated again by this job or its sensor (an operator's change
stands until an operator rolls back to it). Runs for one partition are serialized by the
``prme/activation_target`` run-tag limit in ``dagster.yaml``; the pointer change itself is a
compare-and-set in the domain store, so even concurrent ad-hoc runs cannot both win.
"""

import bisect

import dagster as dg

from prme_assets.check_records import latest_checks, latest_materialization
from prme_assets.checks import GATE_CHECKS
from prme_assets.partitions import LEARNING_TARGETS, decode_target
from prme_assets.resources import STORE_POOL, PrmeStoreResource
from prme_core.errors import ReactivationRefused
from prme_core.learning.stages import activation_change_id
from prme_core.profiles import registry as profiles
from prme_core.profiles.model import RankingProfileState
from prme_core.profiles.verdicts import runtime_verdict

ACTIVATION_TAG = "prme/activation_target"


class ActivationConfig(dg.Config):
    partition_key: str
    profile_id: str


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
) -> dg.Output[dict]:
    """Activate a sensor-approved profile: idempotent for retries of the same decision, and never
    undoing an operator's change.

    A re-run finds its change already recorded and reports ``outcome=already_recorded`` with the
    profile active now; nothing is written. If the profile served this partition before and was
    deactivated or rolled back away since, the run fails with that reason and activates nothing:
    serving it again is a deliberate ``rollback_profile_job`` with its profile id.
    """
    owner, scopes = decode_target(config.partition_key)
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
    return dg.Output(
        {"profile_id": str(profile.profile_id), "change_id": str(state.change_id)},
        metadata={"profile_id": str(profile.profile_id), **_pointer_change_metadata(context, state, done="activated")},
    )


@dg.job(tags={"prme/kind": "activation"}, description="Activate one candidate profile (launched by the sensor).")
def activate_profile_job():
    activate_profile_op()


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


def activation_request(
    instance: dg.DagsterInstance, partition: str, prme_store: PrmeStoreResource
) -> dg.RunRequest | str:
    """A run request for the partition, or the reason there is none."""
    materialization = latest_materialization(instance, "candidate_profile", partition)
    if materialization is None:
        return "no candidate profile"
    failed = [
        c.name
        for c in latest_checks(instance, GATE_CHECKS, partition)
        if not c.passed or c.run_id != materialization.run_id
    ]
    if failed:
        return f"gates not passed for the newest candidate profile: {', '.join(failed)}"
    profile_id = materialization.metadata.get("profile_id")
    owner, scopes = decode_target(partition)
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
    )


class DeactivationConfig(dg.Config):
    partition_key: str
    expected_profile_id: str = ""
    """Fail unless this profile is the active one (empty: don't check)."""
    change_id: str = ""
    """A UUID making retries exact no-ops (empty: a new change)."""


@dg.op(pool=STORE_POOL, description="Return a partition to base scoring (a recorded state).")
def deactivate_profile_op(context: dg.OpExecutionContext, config: DeactivationConfig, prme_store: PrmeStoreResource):
    owner, scopes = decode_target(config.partition_key)
    kwargs = {"expected_profile_id": config.expected_profile_id} if config.expected_profile_id else {}
    with prme_store.client() as client:
        state = client.deactivate_ranking_profile(
            owner=owner, scopes=scopes, change_id=config.change_id or None, **kwargs
        )
    context.add_output_metadata(_pointer_change_metadata(context, state, done="deactivated"))


@dg.job(tags={"prme/kind": "deactivation"}, description="Operator job: deactivate the profile of one partition.")
def deactivate_profile_job():
    deactivate_profile_op()


class RollbackConfig(dg.Config):
    partition_key: str
    profile_id: str = ""
    """An earlier profile of this partition; empty rolls back to base scoring."""
    expected_profile_id: str = ""
    change_id: str = ""


@dg.op(pool=STORE_POOL, description="Point a partition at an earlier profile, or at base scoring.")
def rollback_profile_op(context: dg.OpExecutionContext, config: RollbackConfig, prme_store: PrmeStoreResource):
    owner, scopes = decode_target(config.partition_key)
    kwargs = {"expected_profile_id": config.expected_profile_id} if config.expected_profile_id else {}
    with prme_store.client() as client:
        state = client.rollback_ranking_profile(
            config.profile_id or None, owner=owner, scopes=scopes, change_id=config.change_id or None, **kwargs
        )
    context.add_output_metadata(_pointer_change_metadata(context, state, done="rolled_back"))


@dg.job(tags={"prme/kind": "rollback"}, description="Operator job: roll one partition back.")
def rollback_profile_job():
    rollback_profile_op()
