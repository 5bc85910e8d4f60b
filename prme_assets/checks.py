"""All gates: blocking, partitioned asset checks that only enforce ``prme_core`` verdicts.

Every check returns a result (a gate that cannot be evaluated fails), with the facts of its
verdict, ``outcome`` and ``reason`` as metadata. An integrity failure is an ERROR-severity
failure: the step fails, the partition's downstream stages do not run, the run fails, and the run
is tagged with the outcome. An expected "no" (not enough evidence, no improvement) is a WARN
failure: still ``passed=False`` for the activation sensor, while the next stage declines and
the run ends successfully with the later stages skipped (``prme_assets.outcome``).
"""

import dagster as dg

from prme_assets.holdout import full_retrieval_holdout
from prme_assets.metadata import facts
from prme_assets.outcome import record_outcome, severity
from prme_assets.partitions import LEARNING_TARGETS
from prme_assets.profile import candidate_profile
from prme_assets.proposal import ranking_proposal
from prme_assets.resources import STORE_POOL, PrmeStoreResource
from prme_assets.split import query_split
from prme_core.learning import verdicts
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.stages import HoldoutOutcome, SplitSummary
from prme_core.profiles import verdicts as profile_verdicts
from prme_core.profiles.model import RankingProfile


def result(context: dg.AssetCheckExecutionContext, verdict: verdicts.Verdict) -> dg.AssetCheckResult:
    if verdict.outcome == "integrity_failure":
        record_outcome(context, context.check_specs[0].name, verdict)
    return gate_result(verdict)


def gate_result(verdict: verdicts.Verdict) -> dg.AssetCheckResult:
    """A verdict as a check result (the batched learning job records the same, per partition)."""
    return dg.AssetCheckResult(
        passed=verdict.passed,
        severity=severity(verdict),
        description=verdict.description,
        metadata=facts({**verdict.facts, "outcome": verdict.outcome, "reason": verdict.description}),
    )


def _gate(asset, **kw):
    return dg.asset_check(asset=asset, blocking=True, partitions_def=LEARNING_TARGETS, pool=STORE_POOL, **kw)


@_gate(query_split, description="Enough independent training and validation query groups.")
def coverage_sufficient(context: dg.AssetCheckExecutionContext, query_split: SplitSummary) -> dg.AssetCheckResult:
    return result(context, verdicts.coverage_verdict(query_split))


@_gate(query_split, description="Every judged candidate replays at unity to exactly its recorded score.")
def baseline_replay_exact(context: dg.AssetCheckExecutionContext, query_split: SplitSummary) -> dg.AssetCheckResult:
    return result(context, verdicts.replay_verdict(query_split))


@_gate(
    ranking_proposal,
    description="Validation NDCG gain ≥ minimum, bootstrap lower endpoint > 0, no pairwise-accuracy regression.",
)
def offline_gate_passed(
    context: dg.AssetCheckExecutionContext, ranking_proposal: LearningEvaluation
) -> dg.AssetCheckResult:
    return result(context, verdicts.offline_gate_verdict(ranking_proposal))


@_gate(full_retrieval_holdout, description="The owner's memory digest was identical before and after the pairs.")
def holdout_memory_unchanged(
    context: dg.AssetCheckExecutionContext, full_retrieval_holdout: HoldoutOutcome
) -> dg.AssetCheckResult:
    return result(context, verdicts.holdout_memory_verdict(full_retrieval_holdout))


@_gate(
    full_retrieval_holdout,
    description="Holdout NDCG gain ≥ minimum, bootstrap lower endpoint > 0, "
    "no recall loss, bounded share of regressed groups.",
)
def holdout_gate_passed(
    context: dg.AssetCheckExecutionContext, full_retrieval_holdout: HoldoutOutcome
) -> dg.AssetCheckResult:
    return result(context, verdicts.holdout_gate_verdict(full_retrieval_holdout))


@_gate(
    candidate_profile,
    description="The profile embeds exactly the gated reports and its holdout baseline "
    "still serves the scope set (not stale).",
    additional_ins={
        "ranking_proposal": dg.AssetIn("ranking_proposal"),
        "full_retrieval_holdout": dg.AssetIn("full_retrieval_holdout"),
    },
)
def profile_evidence_bound(
    context: dg.AssetCheckExecutionContext,
    candidate_profile: RankingProfile,
    ranking_proposal: LearningEvaluation,
    full_retrieval_holdout: HoldoutOutcome,
    prme_store: PrmeStoreResource,
) -> dg.AssetCheckResult:
    with prme_store.client() as client:
        active = client.get_active_ranking_profile(candidate_profile.owner, candidate_profile.scopes)
    return result(
        context,
        profile_verdicts.evidence_bound_verdict(
            candidate_profile, ranking_proposal, full_retrieval_holdout, None if active is None else active.profile_id
        ),
    )


@_gate(candidate_profile, description="The recorded feature identity and base scoring match the running pipeline.")
def runtime_compatible(
    context: dg.AssetCheckExecutionContext, candidate_profile: RankingProfile, prme_store: PrmeStoreResource
) -> dg.AssetCheckResult:
    with prme_store.client() as client:
        return result(
            context,
            profile_verdicts.runtime_verdict(
                candidate_profile,
                running_features_sha256=client.running_feature_identity(),
                running_scoring=client.settings.scoring,
            ),
        )


GATES = (
    coverage_sufficient,
    baseline_replay_exact,
    offline_gate_passed,
    holdout_memory_unchanged,
    holdout_gate_passed,
    profile_evidence_bound,
    runtime_compatible,
)
"""The registry of gates, in pipeline order: ``Definitions`` registers exactly these checks and the
activation sensor requires every one of them, so a gate added here is enforced in both places."""

GATE_CHECKS: tuple[tuple[str, str], ...] = tuple(
    (key.asset_key.to_user_string(), key.name) for gate in GATES for key in gate.check_keys
)
"""(asset, check) of every gate in ``GATES``: what the activation sensor reads for a partition."""
