"""Looks: the store's count of the proposals a partition's learning made and of how often its
holdout judged them.

Every holdout evaluation a version-3 or -4 gate decides is a *look* at the registered holdout
queries of one owner, scope set and baseline (the active profile it competes with, or base
scoring), and its level depends on its number:

* version 4 (a proposal this store recorded): the proposal's *offline look* t is its place
  among the partition's recorded proposals (``proposal_look``: every offline evaluation the
  store produced for that owner and scope set, passed or not, in admission order), and the
  look j is numbered among the looks at that one proposal and baseline; the level is
  ``gates.holdout_level(t, j)``;
* version 3 (a holdout of a proposal the store did not record): the look k is numbered among
  all the looks of the partition and baseline; the level is ``gates.look_alpha(budget, k)``.

The store records every look as an append-only ``holdout_look`` operation, numbered in order
under a per-counter lock; the evaluation records its numbers, and profile creation re-derives
them (a report cannot claim a first look, or an earlier proposal, it did not have).

A look's id is derived from what it judged (proposal, candidate multipliers, baseline, memory
artifact, holdout groups), so re-running the identical evaluation — a retried run, a
re-materialized holdout — lands on the first look and spends nothing: the same inputs give the
same paired retrievals and the same decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import Field, ValidationError

from prme_core.canonical import canonical_json, sha256_hex
from prme_core.errors import CorruptRecord
from prme_core.learning.full_retrieval import FullRetrievalEvaluation, FullRetrievalTrial, evaluate_full_retrieval
from prme_core.learning.reports import OP_REPORT, record_report, recorded_operation
from prme_core.memory.models import ScopeSet
from prme_core.receipts.projection import scope_key as make_scope_key
from prme_core.retrieval.multipliers import RankingMultipliers
from prme_core.storage.base import Store
from prme_core.storage.records import OperationDraft
from prme_core.types import FrozenModel, Label, Owner, Sha256Hex, UtcDatetime, utc_now

OP_LOOK = "holdout_look"


class HoldoutLook(FrozenModel):
    """One look at a partition's holdout: what it judged and its number among that experiment's looks."""

    schema_version: Literal[1] = 1
    look_id: UUID
    owner: Owner
    scopes: ScopeSet
    baseline_profile_id: UUID | None
    proposal_input_checksum: Sha256Hex
    candidate_multipliers: RankingMultipliers
    memory_artifact_sha256: Sha256Hex
    group_ids: tuple[Label, ...] = Field(min_length=1)
    look: int = Field(ge=1)
    recorded_at: UtcDatetime


def experiment_key(
    scopes: Sequence[str], baseline_profile_id: UUID | None, proposal_input_checksum: str | None = None
) -> str:
    """The counter a look is numbered by: the looks of one owner, scope set and baseline
    (version 3), or of one proposal against that baseline (version 4, ``proposal_input_checksum``)."""
    baseline = "base" if baseline_profile_id is None else str(baseline_profile_id)
    key = f"holdout-looks:{make_scope_key(scopes)}:{baseline}"
    return key if proposal_input_checksum is None else f"{key}:{proposal_input_checksum}"


@dataclass(frozen=True)
class LookKey:
    """What a look judged: the same key is the same look (and spends nothing again)."""

    owner: str
    scopes: tuple[str, ...]
    baseline_profile_id: UUID | None
    proposal_input_checksum: str
    candidate_multipliers: RankingMultipliers
    memory_artifact_sha256: str
    group_ids: tuple[str, ...]

    @classmethod
    def of(cls, evaluation: FullRetrievalEvaluation, baseline_profile_id: UUID | None) -> LookKey:
        """The key of a holdout evaluation against ``baseline_profile_id``."""
        return cls(
            evaluation.owner,
            tuple(evaluation.scopes),
            baseline_profile_id,
            evaluation.proposal_input_checksum,
            evaluation.candidate_multipliers,
            evaluation.memory_artifact_sha256,
            tuple(sorted({t.group_id for t in evaluation.trials})),
        )

    def look_id(self) -> UUID:
        key = [
            "prme:holdout-look:v1",
            self.owner,
            make_scope_key(self.scopes),
            None if self.baseline_profile_id is None else str(self.baseline_profile_id),
            self.proposal_input_checksum,
            self.candidate_multipliers.model_dump(mode="json"),
            self.memory_artifact_sha256,
            sorted(set(self.group_ids)),
        ]
        return uuid5(NAMESPACE_URL, canonical_json(key).decode())


def record_look(store: Store, key: LookKey, *, per_proposal: bool = False) -> HoldoutLook:
    """The look of this evaluation: the stored one if the identical evaluation was looked at
    before, else a new look numbered one past the newest of its counter (under its lock): the
    partition's and baseline's, or with ``per_proposal`` (version 4) that one proposal's."""
    lid, owner = key.look_id(), key.owner
    checksum = key.proposal_input_checksum if per_proposal else None
    target = experiment_key(key.scopes, key.baseline_profile_id, checksum)
    with store.transaction() as tx:
        tx.lock(f"{OP_LOOK}:{owner}:{target}")
        existing = tx.get_operation(owner, str(lid))
        if existing is not None:
            return _parse(existing, owner)
        newest = tx.latest_operation(owner, OP_LOOK, target)
        judged = {**vars(key), "group_ids": tuple(sorted(set(key.group_ids)))}  # the look records its key
        look = HoldoutLook(
            **judged,
            look_id=lid,
            look=1 if newest is None else _parse(newest, owner).look + 1,
            recorded_at=utc_now(),
        )
        tx.append_operation(
            OperationDraft.of(
                id=str(lid),
                owner=owner,
                op_type=OP_LOOK,
                body=look.model_dump(mode="json"),
                scope_key=make_scope_key(key.scopes),
                target_id=target,
            )
        )
    return look


@dataclass(frozen=True)
class ProposalLook:
    """A recorded proposal's place among its partition's proposals, and its offline gate's level."""

    offline_look: int
    offline_alpha: float


def proposal_look(store: Store, proposal: Any) -> ProposalLook | None:
    """The version-4 facts of a proposal (a ``LearningEvaluation``): its number among the
    offline evaluations this store recorded for its owner and scope set (1 + those admitted
    before its own record), and the level its offline gate tested at. None when the store did
    not record it or its gate had no test level (version 1): its holdout then spends by the
    version-3 rule."""
    alpha = proposal.config.max_p_value
    if alpha is None:
        return None
    with store.transaction(read_only=True) as tx:
        own = recorded_operation(tx, proposal)
        if own is None:
            return None
        before = tx.count_operations_before(
            proposal.owner, OP_REPORT, scope_key=own.scope_key, target_id=own.target_id, before_seq=own.seq
        )
    return ProposalLook(offline_look=before + 1, offline_alpha=alpha)


def get_look(store: Store, owner: str, look: UUID) -> HoldoutLook | None:
    """The owner's stored look by id, verified; None when there is none."""
    with store.transaction(read_only=True) as tx:
        op = tx.get_operation(owner, str(look))
    if op is None or op.op_type != OP_LOOK:
        return None
    return _parse(op, owner)


def _parse(op: Any, owner: str) -> HoldoutLook:
    """A verified look operation's record: type, owner, id and canonical checksum must agree."""
    if op.op_type != OP_LOOK:
        raise CorruptRecord(f"operation {op.id} is a {op.op_type}, not a {OP_LOOK}")
    try:
        look = HoldoutLook.model_validate_json(op.payload)
    except ValidationError as exc:
        raise CorruptRecord(f"stored {OP_LOOK} {op.id} no longer validates: {exc.errors()[0]['msg']}") from exc
    if look.owner != owner or str(look.look_id) != op.id:
        raise CorruptRecord(f"stored {OP_LOOK} {op.id}: owner or identity mismatch")
    if sha256_hex(look.canonical_bytes()) != op.checksum:
        raise CorruptRecord(f"stored {OP_LOOK} {op.id}: canonical bytes do not reproduce its checksum")
    return look


def evaluate_as_look(
    store: Store,
    receipts: Mapping[UUID, tuple[Any, str]],
    trials: Sequence[FullRetrievalTrial],
    *,
    baseline_profile_id: UUID | None = None,
    **arguments: Any,
) -> FullRetrievalEvaluation:
    """``evaluate_full_retrieval`` (``arguments``: its keywords) as a recorded look: every
    argument and receipt is verified first (a refused evaluation spends nothing), then the look
    is recorded and the evaluation decides at the level its number may spend."""
    verified = evaluate_full_retrieval(receipts, trials, **arguments)
    look = record_look(store, LookKey.of(verified, baseline_profile_id))
    report = evaluate_full_retrieval(receipts, trials, **arguments, look=look.look)
    record_report(store, report)
    return report
