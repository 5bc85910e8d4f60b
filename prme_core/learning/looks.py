"""Holdout looks: the store's count of how often a partition's holdout judged a proposal.

Every holdout evaluation a version-3 gate decides is a *look* at the registered holdout
queries of one owner, scope set and baseline (the active profile it competes with, or base
scoring). Each look may spend only ``gates.look_alpha(budget, k)`` of the holdout's error
budget, so the k-th look must know k. The store records every look as an append-only
``holdout_look`` operation, numbered in order under a per-experiment lock; the evaluation
records its number, and profile creation re-reads the look to check it (a report cannot claim
a first look it did not have).

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
from prme_core.learning.reports import record_report
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


def experiment_key(scopes: Sequence[str], baseline_profile_id: UUID | None) -> str:
    """The looks of one owner, scope set and baseline share one budget (and one counter)."""
    baseline = "base" if baseline_profile_id is None else str(baseline_profile_id)
    return f"holdout-looks:{make_scope_key(scopes)}:{baseline}"


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


def record_look(store: Store, key: LookKey) -> HoldoutLook:
    """The look of this evaluation: the stored one if the identical evaluation was looked at
    before, else a new look numbered one past the experiment's newest (under its lock)."""
    lid, owner = key.look_id(), key.owner
    target = experiment_key(key.scopes, key.baseline_profile_id)
    with store.transaction() as tx:
        tx.lock(f"{OP_LOOK}:{owner}:{target}")
        existing = tx.get_operation(owner, str(lid))
        if existing is not None:
            return _parse(existing, owner)
        newest = tx.latest_operation(owner, OP_LOOK, target)
        look = HoldoutLook(
            look_id=lid,
            owner=owner,
            scopes=key.scopes,
            baseline_profile_id=key.baseline_profile_id,
            proposal_input_checksum=key.proposal_input_checksum,
            candidate_multipliers=key.candidate_multipliers,
            memory_artifact_sha256=key.memory_artifact_sha256,
            group_ids=tuple(sorted(set(key.group_ids))),
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
