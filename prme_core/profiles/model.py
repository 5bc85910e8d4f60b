"""Profile and pointer-change models.

A ``RankingProfile`` can only exist when its offline proposal and its full-retrieval holdout
both passed, for the same owner, exact scope set, surface, proposal input checksum and
multipliers; a holdout run against non-unity baseline multipliers must name the profile that
supplied them. The model validator enforces all of it, so a profile that loads is one whose
evidence allowed it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, PrivateAttr, model_validator

from prme_core.learning.full_retrieval import FullRetrievalEvaluation
from prme_core.learning.proposal import LearningEvaluation
from prme_core.receipts.projection import scope_key
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.multipliers import UNITY, RankingMultipliers
from prme_core.types import FrozenModel, Owner, Sha256Hex, SortedUnique, UtcDatetime


class RankingProfileApplication(FrozenModel):
    """What retrieval needs to apply a profile (stored on every pointer change)."""

    schema_version: Literal[1] = 1
    profile_id: UUID
    multipliers: RankingMultipliers
    feature_identity_sha256: Sha256Hex
    base_scoring: ScoringWeights


class RankingProfile(FrozenModel):
    schema_version: Literal[1] = 1
    profile_id: UUID
    owner: Owner
    scopes: Annotated[tuple[str, ...], Field(min_length=1), SortedUnique]
    surface: Literal["results"] = "results"
    multipliers: RankingMultipliers
    baseline_profile_id: UUID | None = None
    created_at: UtcDatetime
    proposal: LearningEvaluation
    holdout: FullRetrievalEvaluation

    @model_validator(mode="after")
    def _evidence_allows_it(self) -> RankingProfile:
        p, h = self.proposal, self.holdout
        if p.owner != self.owner or h.owner != self.owner:
            raise ValueError("both reports must belong to the profile's owner")
        if tuple(p.scopes) != self.scopes or tuple(h.scopes) != self.scopes:
            raise ValueError("both reports must cover exactly the profile's scope set")
        if p.surface != self.surface or h.surface != self.surface:
            raise ValueError("both reports must judge the results surface")
        if p.decision != "improved_on_observed_candidates":
            raise ValueError(f"the offline proposal decided {p.decision!r}; a profile needs an improvement")
        if h.decision != "improved_full_retrieval":
            raise ValueError(f"the full-retrieval holdout decided {h.decision!r}; a profile needs an improvement")
        if h.proposal_input_checksum != p.input_checksum:
            raise ValueError("the holdout evaluated a different proposal (input checksums differ)")
        if not (self.multipliers == p.multipliers == h.candidate_multipliers):
            raise ValueError("profile, proposal and holdout candidate multipliers must be identical")
        if self.baseline_profile_id is None and h.baseline_multipliers != UNITY:
            raise ValueError("a holdout run against non-unity baseline multipliers must name its baseline_profile_id")
        if self.baseline_profile_id == self.profile_id:
            raise ValueError("a profile cannot be its own baseline")
        return self

    @property
    def scope_key(self) -> str:
        return scope_key(self.scopes)

    def evidence(self) -> dict[str, Any]:
        """Everything but the creation time (what an exact retry must reproduce)."""
        return self.model_dump(exclude={"created_at"})

    def application(self) -> RankingProfileApplication:
        return RankingProfileApplication(
            profile_id=self.profile_id,
            multipliers=self.multipliers,
            feature_identity_sha256=self.holdout.feature_identity_sha256,
            base_scoring=self.holdout.base_scoring,
        )


Action = Literal["activate", "deactivate", "rollback"]


class RankingProfileState(FrozenModel):
    """One append-only change of the active pointer of (owner, exact scope set).

    A change call that finds its change id already recorded returns that earlier record marked
    ``replayed``, with ``superseded_by`` set when a newer change has moved the pointer since: a
    retry never reads as a change made now, nor as the pointer's current state.
    """

    schema_version: Literal[1] = 1
    change_id: UUID
    owner: Owner
    scopes: tuple[str, ...] = Field(min_length=1)
    action: Action
    previous_profile_id: UUID | None
    active_profile_id: UUID | None
    application: RankingProfileApplication | None = None
    changed_at: UtcDatetime
    _replayed: bool = PrivateAttr(default=False)
    _superseded_by: RankingProfileState | None = PrivateAttr(default=None)

    @property
    def replayed(self) -> bool:
        """True when a change call found this change already recorded and wrote nothing."""
        return self._replayed

    @property
    def superseded_by(self) -> RankingProfileState | None:
        """On a replay: the pointer's newest change when it is not this one (None: still in force)."""
        return self._superseded_by

    def as_replay(self, newest: RankingProfileState) -> RankingProfileState:
        """This stored change as returned to a retry, given the pointer's newest change."""
        replay = self.model_copy()
        replay._replayed = True
        replay._superseded_by = None if newest.change_id == self.change_id else newest
        return replay

    @model_validator(mode="after")
    def _coherent(self) -> RankingProfileState:
        if self.action == "activate" and self.active_profile_id is None:
            raise ValueError("an activation must name the profile it activates")
        if self.action == "deactivate" and self.active_profile_id is not None:
            raise ValueError("a deactivation returns to base scoring")
        if self.previous_profile_id == self.active_profile_id:
            raise ValueError("a change must change the active profile (no-op changes are rejected)")
        if (self.application is None) != (self.active_profile_id is None):
            raise ValueError("the application is recorded exactly when a profile is active")
        if self.application is not None and self.application.profile_id != self.active_profile_id:
            raise ValueError("the application belongs to another profile")
        return self

    def canonical_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if data["application"] is None:
            del data["application"]
        return data


class RankingProfileStatus(FrozenModel):
    profile: RankingProfile
    active: bool
    latest_change: RankingProfileState | None
