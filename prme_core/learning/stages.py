"""The learning loop as stages with persisted outputs, for an orchestrator to run one by one.

snapshot (``SnapshotManifest``) → split (``SplitSummary``) → proposal (``LearningEvaluation``)
→ holdout (``HoldoutOutcome``) → candidate profile (``RankingProfile``). Each stage is a thin
composition of the pure functions and store entry points; its output is a frozen model that
a later stage (in another process) can reload. Nothing here activates anything.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import Field

from prme_core.canonical import canonical_json
from prme_core.errors import HoldoutOverlapsTraining, HoldoutQueryNotFound, MemoryChangedDuringHoldout
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import FullRetrievalEvaluation, FullRetrievalEvaluationConfig
from prme_core.learning.observations import prepare
from prme_core.learning.offline import baseline_replay_check, coverage_of, evaluate_learning, pool_replay_check
from prme_core.learning.proposal import LearningCoverage, LearningEvaluation
from prme_core.learning.reports import record_report
from prme_core.learning.snapshot import FeedbackSnapshot
from prme_core.storage.base import Store
from prme_core.types import EvolvingModel, FrozenModel, Owner, Sha256Hex


class SplitGroup(FrozenModel):
    group_id: Sha256Hex
    split: Literal["train", "validation"]
    requests: int = Field(ge=1)


class SplitSummary(EvolvingModel):
    """The query split and the two facts gated before fitting: coverage and exact replay. On
    the pool path (``fit_path``) the replay counts are recorded returned lists that re-ranking
    the recorded pools must reproduce; on the judged path, judged candidates' scores."""

    ADDED_FIELDS: ClassVar[tuple[str, ...]] = ("fit_path", "fit_reason")

    owner: Owner
    scopes: tuple[str, ...]
    snapshot_sha256: Sha256Hex
    config: LearningConfig
    coverage: LearningCoverage
    exclusions: dict[str, int]
    min_training_queries: int
    min_validation_queries: int
    replay_candidates: int
    replay_mismatches: int
    replay_worst_difference: float
    groups: tuple[SplitGroup, ...]
    fit_path: Literal["pool", "judged"] | None = None
    fit_reason: str | None = None

    @property
    def coverage_sufficient(self) -> bool:
        return (
            self.coverage.training_queries >= self.min_training_queries
            and self.coverage.validation_queries >= self.min_validation_queries
        )

    @property
    def replay_exact(self) -> bool:
        return self.replay_mismatches == 0


def split_stage(
    snapshot: FeedbackSnapshot,
    *,
    owner: str,
    scopes: Any,
    config: LearningConfig | None = None,
    query_groups: dict[str, str] | None = None,
) -> SplitSummary:
    prepared = prepare(snapshot, owner=owner, scopes=scopes, config=config, query_groups=query_groups)
    replay = pool_replay_check(prepared) if prepared.path == "pool" else baseline_replay_check(prepared)
    cfg = prepared.config
    return SplitSummary(
        owner=prepared.owner,
        scopes=prepared.scopes,
        snapshot_sha256=prepared.snapshot_sha256,
        config=cfg,
        coverage=coverage_of(prepared),
        exclusions=prepared.exclusions,
        min_training_queries=cfg.min_training_queries,
        min_validation_queries=cfg.min_validation_queries,
        replay_candidates=replay.candidates,
        replay_mismatches=replay.mismatches,
        replay_worst_difference=replay.worst_difference,
        groups=tuple(
            SplitGroup(group_id=g, split="validation" if info.validation else "train", requests=len(info.requests))
            for g, info in sorted(prepared.groups.items())
        ),
        fit_path=prepared.path,
        fit_reason=prepared.path_reason,
    )


HoldoutStatus = Literal["evaluated", "memory_changed", "query_overlap", "no_holdout_queries"]


class HoldoutOutcome(FrozenModel):
    """What the holdout stage produced: an evaluation, or the reason there is none."""

    status: HoldoutStatus
    owner: Owner
    scopes: tuple[str, ...]
    proposal_input_checksum: Sha256Hex
    baseline_profile_id: UUID | None = None
    memory_before: str = ""
    memory_after: str = ""
    message: str = ""
    evaluation: FullRetrievalEvaluation | None = None


def holdout_stage(
    client: Any, proposal: LearningEvaluation, config: FullRetrievalEvaluationConfig | dict[str, Any] | None = None
) -> HoldoutOutcome:
    """Run the registered holdout against what currently serves the scope set."""
    baseline_id, baseline = client.holdout_baseline(proposal.owner, proposal.scopes)
    common = dict(
        owner=proposal.owner,
        scopes=proposal.scopes,
        proposal_input_checksum=proposal.input_checksum,
        baseline_profile_id=baseline_id,
    )
    try:
        run = client.run_holdout(
            proposal.owner,
            proposal.scopes,
            candidate_multipliers=proposal.multipliers,
            baseline_multipliers=baseline,
            excluded_query_digests=proposal.query_digests(),
        )
    except MemoryChangedDuringHoldout as exc:
        return HoldoutOutcome(
            status="memory_changed", memory_before=exc.before, memory_after=exc.after, message=str(exc), **common
        )
    except HoldoutQueryNotFound as exc:
        return HoldoutOutcome(status="no_holdout_queries", message=str(exc), **common)
    except HoldoutOverlapsTraining as exc:
        return HoldoutOutcome(status="query_overlap", message=str(exc), **common)
    evaluation = client.judge_holdout(run, proposal, baseline_id, config)
    return HoldoutOutcome(
        status="evaluated",
        memory_before=run.memory_artifact_sha256,
        memory_after=run.memory_artifact_sha256,
        evaluation=evaluation,
        **common,
    )


def proposal_stage(
    store: Store,
    snapshot: FeedbackSnapshot,
    *,
    owner: str,
    scopes: Any,
    config: LearningConfig | None = None,
    query_groups: dict[str, str] | None = None,
) -> LearningEvaluation:
    """The offline proposal of a partition's snapshot, kept as evidence the store produced."""
    report = evaluate_learning(snapshot, owner=owner, scopes=scopes, config=config, query_groups=query_groups)
    record_report(store, report)
    return report


def candidate_profile_id(proposal: LearningEvaluation, holdout: FullRetrievalEvaluation) -> UUID:
    """A profile id derived from its evidence, so re-materializing creates no duplicate."""
    key = [
        "prme:candidate-profile:v1",
        proposal.owner,
        list(proposal.scopes),
        proposal.input_checksum,
        holdout.input_checksum,
        proposal.multipliers.model_dump(),
    ]
    return uuid5(NAMESPACE_URL, canonical_json(key).decode())


def activation_change_id(profile_id: UUID) -> UUID:
    """The change id an orchestrated activation uses: a rerun is an exact retry, hence a no-op."""
    return uuid5(NAMESPACE_URL, f"prme:activate-profile:v1:{profile_id}")
