"""Persisting profiles and changing the scoped active pointer (append-only, both backends).

Profiles and pointer changes are checksummed operations. The pointer of (owner, exact scope
set) is its newest change record; every change runs in one transaction holding a per-key lock
(an advisory transaction lock on PostgreSQL; DuckDB serializes all writers), re-reads the
pointer, compares it with the caller's expected state and appends. A caller change UUID makes an
exact retry return the first record (marked ``replayed``, and ``superseded_by`` the newer change
when the pointer has moved since), even after a restart; reusing it for a different change
fails. Nothing is ever updated in place, so the history answers "what served at time T".

Each pointer also has a head row (``ranking_pointer_heads``), a derived index that retrieval
reads first; retrieval believes it only after checking it against the log (``pointer_head``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from pydantic import ValidationError

from prme_core.errors import (
    CorruptRecord,
    IdempotencyConflict,
    InvalidEvidence,
    InvalidInput,
    NoOpTransition,
    PointerHeadStale,
    ProfileInapplicable,
    ProfileNotFound,
    ReactivationRefused,
    StaleProfileError,
)
from prme_core.learning.full_retrieval import FullRetrievalEvaluation
from prme_core.learning.looks import LookKey, get_look, proposal_look
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.reports import is_recorded
from prme_core.memory.bank import parse_uuid
from prme_core.profiles.model import RankingProfile, RankingProfileState, RankingProfileStatus
from prme_core.receipts.projection import scope_key
from prme_core.retrieval.config import ScoringWeights
from prme_core.storage.base import Store
from prme_core.storage.keyed_records import parse_record, record_operation_id
from prme_core.storage.records import OperationDraft, StoredOperation
from prme_core.storage.session import StoreSession
from prme_core.types import utc_now
from prme_core.validation import check_limit, check_owner, check_scope_set, describe

OP_PROFILE = "ranking_profile"
OP_STATE = "ranking_profile_state"
KEEP = object()  # "do not check the expected active profile"
MAX_HISTORY = 1_000_000

Applicability = Callable[[RankingProfile], str | None]  # reason it cannot apply, or None


# --- profiles -------------------------------------------------------------------------------


def create_profile(
    store: Store,
    proposal: LearningEvaluation,
    holdout: FullRetrievalEvaluation,
    *,
    owner: Any,
    profile_id: Any = None,
    baseline_profile_id: Any = None,
) -> RankingProfile:
    """Validate and persist a profile (its complete evidence) without activating it."""
    owner = check_owner(owner)
    pid = uuid4() if profile_id is None else parse_uuid(profile_id, "profile_id")
    baseline = None if baseline_profile_id is None else parse_uuid(baseline_profile_id, "baseline_profile_id")
    if baseline is not None:
        base = get_profile(store, baseline, owner)
        if base is None:
            raise ProfileNotFound(f"baseline profile {baseline} does not exist for this owner")
        if base.scopes != tuple(holdout.scopes) or base.multipliers != holdout.baseline_multipliers:
            raise InvalidInput(
                "baseline_profile_id", "the holdout's baseline arm did not use that profile's scope set and multipliers"
            )
    try:
        profile = RankingProfile(
            profile_id=pid,
            owner=owner,
            scopes=tuple(holdout.scopes),
            multipliers=proposal.multipliers,
            baseline_profile_id=baseline,
            created_at=utc_now(),
            proposal=proposal,
            holdout=holdout,
        )
    except ValidationError as exc:
        raise InvalidInput(*describe(exc, "profile")) from None
    for kind, report in (("proposal", proposal), ("holdout", holdout)):
        if not is_recorded(store, report):
            raise InvalidEvidence(
                f"the {kind} is not a report this store produced (no evidence record holds these bytes): a profile "
                "is made only from evaluations computed through the store (MemoryClient.evaluate_learning, "
                "evaluate_holdout, the learning pipeline), as they returned them; an edited report is refused"
            )
    _check_look(store, owner, proposal, holdout, baseline)
    draft = OperationDraft(
        id=record_operation_id("ranking-profile", owner, pid),
        owner=owner,
        op_type=OP_PROFILE,
        payload=profile.canonical_bytes(),
        scope_key=profile.scope_key,
        target_id=str(pid),
    )
    with store.transaction() as tx:
        stored, written = tx.append_operation(draft)
    if written:
        return profile
    first = parse_record(RankingProfile, stored.verified(owner), owner, "profile_id")
    if first.evidence() != profile.evidence():
        raise IdempotencyConflict(f"profile_id {pid} already identifies a different ranking profile; the first stands")
    return first


def _check_look(
    store: Store, owner: str, proposal: LearningEvaluation, holdout: FullRetrievalEvaluation, baseline: UUID | None
) -> None:
    """A version-3 or -4 holdout decided at the level its look could spend: the store must hold
    that look, with that number, for this owner, scope set, baseline, proposal and holdout
    groups; a version-4 holdout's proposal must also hold the place among its partition's
    recorded proposals, and the offline level, that the holdout claims."""
    if holdout.schema_version < 3:
        return
    lid = LookKey.of(holdout, baseline).look_id()
    recorded = get_look(store, owner, lid)
    if recorded is None:
        raise InvalidEvidence(
            "the holdout's look is not recorded in this store: a profile needs a holdout evaluated through "
            "MemoryClient.evaluate_holdout, evaluate_full_retrieval or the pipeline, which record each look "
            "(with the same baseline_profile_id)"
        )
    if recorded.look != holdout.config.look:
        raise InvalidEvidence(
            f"the holdout claims look {holdout.config.look}, but this store recorded it as look {recorded.look} "
            "of its partition's holdout; its decision used the wrong level"
        )
    if holdout.schema_version < 4:
        return
    facts = proposal_look(store, proposal)
    claimed = (holdout.config.offline_look, holdout.config.offline_alpha)
    if facts is None or (facts.offline_look, facts.offline_alpha) != claimed:
        found = (
            "no recorded proposal" if facts is None else f"offline look {facts.offline_look} at {facts.offline_alpha}"
        )
        raise InvalidEvidence(
            f"the holdout claims offline look {claimed[0]} at level {claimed[1]}, but this store holds {found} for "
            "its proposal; its decision used the wrong level"
        )


def get_profile(store: Store, profile_id: Any, owner: Any) -> RankingProfile | None:
    owner = check_owner(owner)
    pid = parse_uuid(profile_id, "profile_id")
    with store.transaction(read_only=True) as tx:
        op = tx.get_operation(owner, record_operation_id("ranking-profile", owner, pid))
    return None if op is None or op.op_type != OP_PROFILE else parse_record(RankingProfile, op, owner, "profile_id")


def list_profiles(store: Store, owner: Any, *, after: Any = None, limit: int = 100) -> list[RankingProfile]:
    owner = check_owner(owner)
    with store.transaction(read_only=True) as tx:
        ops = tx.list_operations(
            owner,
            OP_PROFILE,
            after_target=None if after is None else str(parse_uuid(after, "after")),
            limit=check_limit(limit),
        )
    return [parse_record(RankingProfile, op, owner, "profile_id") for op in ops]


# --- the pointer ----------------------------------------------------------------------------


def _latest_op(tx: StoreSession, owner: str, key: str) -> StoredOperation | None:
    ops = tx.list_operations(owner, OP_STATE, scope_key=key, limit=1, order="seq", newest_first=True)
    return ops[0] if ops else None


def _latest(tx: StoreSession, owner: str, key: str) -> RankingProfileState | None:
    op = _latest_op(tx, owner, key)
    return None if op is None else parse_record(RankingProfileState, op, owner, "change_id")


def _last_served(tx: StoreSession, owner: str, key: str, profile_id: UUID) -> RankingProfileState | None:
    """The newest change that made ``profile_id`` the active profile of the key (None: never)."""
    for op in tx.list_operations(owner, OP_STATE, scope_key=key, limit=MAX_HISTORY, order="seq", newest_first=True):
        state = parse_record(RankingProfileState, op, owner, "change_id")
        if state.active_profile_id == profile_id:
            return state
    return None


def last_served(store: Store, owner: Any, scopes: Any, profile_id: Any) -> RankingProfileState | None:
    """The newest change that made a profile active on (owner, exact scope set), or None."""
    owner = check_owner(owner)
    with store.transaction(read_only=True) as tx:
        return _last_served(tx, owner, scope_key(check_scope_set(scopes)), parse_uuid(profile_id, "profile_id"))


def _replaced(profile_id: UUID, served: RankingProfileState, latest: RankingProfileState) -> ReactivationRefused:
    return ReactivationRefused(
        f"ranking profile {profile_id} served {served.owner!r}/{scope_key(served.scopes)!r} before ({served.action} "
        f"change {served.change_id} at {served.changed_at.isoformat()}) and was replaced since: {latest.action} change "
        f"{latest.change_id} at {latest.changed_at.isoformat()} left {latest.active_profile_id or 'base scoring'} "
        "active. An orchestrated activation does not undo that; to serve the profile again, roll back to it "
        f"deliberately (rollback_ranking_profile, or rollback_profile_job with profile_id={profile_id})"
    )


def current_state(store: Store, owner: Any, scopes: Any) -> RankingProfileState | None:
    """The newest pointer change of (owner, exact scope set), or None if it never changed."""
    owner = check_owner(owner)
    with store.transaction(read_only=True) as tx:
        return _latest(tx, owner, scope_key(check_scope_set(scopes)))


def active_profile(store: Store, owner: Any, scopes: Any) -> RankingProfile | None:
    state = current_state(store, owner, scopes)
    if state is None or state.active_profile_id is None:
        return None
    return get_profile(store, state.active_profile_id, owner)


def profile_status(store: Store, profile_id: Any, owner: Any) -> RankingProfileStatus | None:
    profile = get_profile(store, profile_id, owner)
    if profile is None:
        return None
    latest = current_state(store, profile.owner, profile.scopes)
    return RankingProfileStatus(
        profile=profile, active=bool(latest and latest.active_profile_id == profile.profile_id), latest_change=latest
    )


def _all_states(store: Store, owner: str, scopes: Any) -> list[RankingProfileState]:
    """Every pointer change of (owner, exact scope set), newest first (changes are rare)."""
    key = scope_key(check_scope_set(scopes))
    with store.transaction(read_only=True) as tx:
        ops = tx.list_operations(owner, OP_STATE, scope_key=key, limit=MAX_HISTORY, order="seq", newest_first=True)
    return [parse_record(RankingProfileState, op, owner, "change_id") for op in ops]


def history(
    store: Store, owner: Any, scopes: Any, *, limit: int = 100, before: Any = None
) -> list[RankingProfileState]:
    """Pointer changes of (owner, exact scope set), newest first; pass ``before`` (a change id
    from the previous page) to continue."""
    owner = check_owner(owner)
    limit = check_limit(limit)
    states = _all_states(store, owner, scopes)
    if before is not None:
        marker = parse_uuid(before, "before")
        index = next((i for i, s in enumerate(states) if s.change_id == marker), None)
        if index is None:
            raise InvalidInput("before", f"{marker} is not a change of this scope set")
        states = states[index + 1 :]
    return states[:limit]


def served_at(store: Store, owner: Any, scopes: Any, at: datetime) -> RankingProfileState | None:
    """The change in force at ``at`` (None: no profile had been activated yet)."""
    if not isinstance(at, datetime) or at.tzinfo is None:
        raise InvalidInput("at", "must be a timezone-aware datetime")
    for state in _all_states(store, check_owner(owner), scopes):
        if state.changed_at <= at:
            return state
    return None


def change_pointer(
    store: Store,
    *,
    owner: str,
    scopes: tuple[str, ...],
    action: str,
    target: RankingProfile | None,
    change_id: UUID | None,
    expected: Any = KEEP,
    applicability: Applicability | None = None,
    reactivate: bool = True,
) -> RankingProfileState:
    """Append one pointer change under the per-key lock, or return the stored change of an exact
    retry marked ``replayed`` (``superseded_by`` names the newer change if the pointer moved).

    ``reactivate=False`` refuses (``ReactivationRefused``) a target that served this pointer
    before and was replaced since, on a first attempt and on a retry alike.
    """
    key = scope_key(scopes)
    change = change_id or uuid4()
    op_id = record_operation_id("ranking-profile-state", owner, change)
    with store.transaction() as tx:
        tx.lock(f"ranking-pointer:{owner}:{key}")
        existing = tx.get_operation(owner, op_id)
        target_id = None if target is None else target.profile_id
        latest = _latest(tx, owner, key)
        current = None if latest is None else latest.active_profile_id
        replaced = not reactivate and target_id is not None and latest is not None and current != target_id
        if existing is not None:
            first = parse_record(RankingProfileState, existing, owner, "change_id")
            if (first.action, first.scopes, first.active_profile_id) != (action, scopes, target_id):
                raise IdempotencyConflict(
                    f"change_id {change} already identifies a different ranking profile transition; the first stands"
                )
            if replaced:
                raise _replaced(target_id, first, latest)
            return first.as_replay(latest)
        if replaced:
            served = _last_served(tx, owner, key, target_id)
            if served is not None:
                raise _replaced(target_id, served, latest)
        if expected is not KEEP and current != expected:
            raise StaleProfileError(
                f"the active profile of {owner!r}/{key!r} is {current or 'base scoring'}, not the expected "
                f"{expected or 'base scoring'}; it changed since you looked: re-inspect and retry"
            )
        if current == target_id:
            raise NoOpTransition(f"{action} would leave {target_id or 'base scoring'} active; nothing to change")
        if target is not None and applicability is not None:
            reason = applicability(target)
            if reason is not None:
                raise ProfileInapplicable(f"ranking profile {target.profile_id} is inapplicable: {reason}")
        now = utc_now()
        if latest is not None and now <= latest.changed_at:
            now = latest.changed_at + timedelta(microseconds=1)  # history stays strictly ordered
        state = RankingProfileState(
            change_id=change,
            owner=owner,
            scopes=scopes,
            action=action,  # type: ignore[arg-type]
            previous_profile_id=current,
            active_profile_id=target_id,
            application=None if target is None else target.application(),
            changed_at=now,
        )
        record_change(tx, state)
        return state


def record_change(tx: StoreSession, state: RankingProfileState) -> None:
    """Append a pointer change and move the pointer's head row to it (one transaction).

    The head row is a derived index, rewritten with each change, so retrieval finds the pointer
    by primary key; the append-only change index records the change's log position in the same
    transaction, and ``pointer_head`` checks the row against it and the log.
    """
    key = scope_key(state.scopes)
    op_id = record_operation_id("ranking-profile-state", state.owner, state.change_id)
    draft = OperationDraft(
        id=op_id,
        owner=state.owner,
        op_type=OP_STATE,
        payload=state.canonical_bytes(),
        scope_key=key,
        target_id=str(state.change_id),
    )
    stored, _ = tx.append_operation(draft)
    tx.index_pointer_change(stored)
    tx.write_pointer_head(state.owner, key, stored)


def pointer_head(tx: StoreSession, owner: str, key: str) -> RankingProfileState | None:
    """The newest pointer change of (owner, scope key), found through its head row and believed
    only if the change index agrees and the logged change itself verifies.

    Two small statements, neither of which scans the log: the head row with the newest position
    of the append-only change index (both by key), then the named change from the log by its id,
    which must sit at that position (only when there is a head).
    The head must name the newest indexed change (or be absent when there is none), and that
    change must pass its owner and checksum checks. Raises ``PointerHeadStale`` when the head
    disagrees and ``CorruptRecord`` when the change fails verification or is missing.
    """
    at = checked_head(owner, key, *tx.pointer_position(owner, key))
    if at is None:
        return None
    op = tx.operation_at(*at)  # the named change must sit at the newest indexed position
    return verified_change(owner, key, at[0], op)


def checked_head(
    owner: str, key: str, head: tuple[str, int | None] | None, newest: int | None
) -> tuple[str, int] | None:
    """(operation id, log seq) of the change a head row names, once the head is shown to name
    the newest entry of the change index (None: no head and no change). Raises
    ``PointerHeadStale`` otherwise."""
    if head is None:
        if newest is not None:
            raise PointerHeadStale(
                f"the pointer of {owner!r}/{key!r} has changes in the log but no head row; "
                "rebuild the head from the log (rebuild_pointer_head)"
            )
        return None
    if newest is None or head[1] != newest:
        raise PointerHeadStale(
            f"the pointer head of {owner!r}/{key!r} names {head[0]}, which is not the newest "
            "pointer change in the log; rebuild the head from the log (rebuild_pointer_head)"
        )
    return head[0], newest


def verified_change(owner: str, key: str, op_id: str, op: StoredOperation | None) -> RankingProfileState:
    """The pointer change ``op`` (the log's row of ``op_id`` at the head's position, or None when
    there is none), believed only when it is a change of this scope set that passes its owner
    and checksum checks; ``CorruptRecord`` otherwise. A pure function of its arguments."""
    if op is None or op.op_type != OP_STATE or op.scope_key != key:
        raise CorruptRecord(
            f"pointer change {op_id} of {owner!r}/{key!r} is missing from the log or filed "
            "elsewhere; restore the store from a backup"
        )
    state = parse_record(RankingProfileState, op.verified(owner), owner, "change_id")
    if scope_key(state.scopes) != key:
        raise CorruptRecord(f"pointer change {state.change_id} is filed under {key!r} but names another scope set")
    return state


def rebuild_pointer_head(store: Store, owner: Any, scopes: Any) -> RankingProfileState | None:
    """Rewrite the head row of (owner, exact scope set) from the log's newest verified pointer
    change (or remove it when the log has none); returns that change."""
    owner = check_owner(owner)
    key = scope_key(check_scope_set(scopes))
    with store.transaction() as tx:
        tx.lock(f"ranking-pointer:{owner}:{key}")
        op = _latest_op(tx, owner, key)
        if op is None:
            tx.delete_pointer_head(owner, key)
            return None
        state = parse_record(RankingProfileState, op, owner, "change_id")
        tx.index_pointer_change(op)
        tx.write_pointer_head(owner, key, op)
        return state


def activate(
    store: Store,
    profile_id: Any,
    *,
    owner: Any,
    change_id: Any = None,
    applicability: Applicability | None = None,
    reactivate: bool = True,
) -> RankingProfileState:
    """Activate a profile over exactly the baseline it was evaluated against.

    An existing ``change_id`` returns the earlier record marked ``replayed``; compare its
    ``superseded_by`` (the pointer's newer change, if any) before reporting it as in force.
    ``reactivate=False`` is the orchestrated mode: a profile that served this scope set before
    and was deactivated or rolled back away since is refused (``ReactivationRefused``) instead
    of activated again, so a re-run never undoes an operator's change.
    """
    owner = check_owner(owner)
    profile = get_profile(store, profile_id, owner)
    if profile is None:
        raise ProfileNotFound(f"ranking profile {profile_id} does not exist for this owner")
    return change_pointer(
        store,
        owner=owner,
        scopes=profile.scopes,
        action="activate",
        target=profile,
        change_id=None if change_id is None else parse_uuid(change_id, "change_id"),
        expected=profile.baseline_profile_id,
        applicability=applicability,
        reactivate=reactivate,
    )


def deactivate(
    store: Store, *, owner: Any, scopes: Any, change_id: Any = None, expected_profile_id: Any = KEEP
) -> RankingProfileState:
    """Return (owner, scope set) to base scoring: a recorded state, unlike "never activated"."""
    owner = check_owner(owner)
    expected = (
        expected_profile_id
        if expected_profile_id in (KEEP, None)
        else parse_uuid(expected_profile_id, "expected_profile_id")
    )
    return change_pointer(
        store,
        owner=owner,
        scopes=check_scope_set(scopes),
        action="deactivate",
        target=None,
        change_id=None if change_id is None else parse_uuid(change_id, "change_id"),
        expected=expected,
    )


def rollback(
    store: Store,
    profile_id: Any,
    *,
    owner: Any,
    scopes: Any,
    change_id: Any = None,
    expected_profile_id: Any = KEEP,
    applicability: Applicability | None = None,
) -> RankingProfileState:
    """Point (owner, scope set) at an earlier profile of it, or at base scoring (``None``)."""
    owner = check_owner(owner)
    scope_set = check_scope_set(scopes)
    target = None
    if profile_id is not None:
        target = get_profile(store, profile_id, owner)
        if target is None:
            raise ProfileNotFound(f"ranking profile {profile_id} does not exist for this owner")
        if target.scopes != scope_set:
            raise InvalidInput("profile_id", f"profile {profile_id} belongs to scope set {target.scope_key!r}")
    expected = (
        expected_profile_id
        if expected_profile_id in (KEEP, None)
        else parse_uuid(expected_profile_id, "expected_profile_id")
    )
    return change_pointer(
        store,
        owner=owner,
        scopes=scope_set,
        action="rollback",
        target=target,
        change_id=None if change_id is None else parse_uuid(change_id, "change_id"),
        expected=expected,
        applicability=applicability,
    )


def inapplicable_reason(
    application_features_sha: str,
    application_scoring: ScoringWeights,
    *,
    running_features_sha: str,
    running_scoring: ScoringWeights,
) -> str | None:
    """Why a profile cannot apply to a pipeline: rank fusion, features or base scoring differ."""
    if running_scoring.fusion != "weighted":
        return "rank_fusion_scoring"
    if application_features_sha != running_features_sha:
        return "feature_identity_mismatch"
    if application_scoring != running_scoring:
        return "base_scoring_mismatch"
    return None
