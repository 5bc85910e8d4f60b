"""All gates: blocking, partitioned asset checks that only enforce ``prme_core`` verdicts.

Every check returns a result (a gate that cannot be evaluated fails), with the facts of its
verdict, ``outcome`` and ``reason`` as metadata. An integrity failure is an ERROR-severity
failure: the step fails, the partition's downstream stages do not run, the run fails, and the run
is tagged with the outcome. An expected "no" (not enough evidence, no improvement) is a WARN
failure: still ``passed=False`` for the activation sensor, while the next stage declines and
the run ends successfully with the later stages skipped (``prme_assets.outcome``).
"""

from typing import Any

import dagster as dg

from prme_assets.gate_table import GATE_TABLE, gate
from prme_assets.holdout import full_retrieval_holdout
from prme_assets.metadata import facts
from prme_assets.outcome import record_outcome, severity
from prme_assets.partitions import LEARNING_TARGETS
from prme_assets.profile import candidate_profile
from prme_assets.proposal import ranking_proposal
from prme_assets.resources import STORE_POOL, PrmeStoreResource
from prme_assets.split import query_split
from prme_core.engine import MemoryClient
from prme_core.learning import verdicts
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.stages import HoldoutOutcome, SplitSummary
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


def _gate(name: str, asset: Any, **kw: Any) -> Any:
    """A blocking, partitioned check for the table's gate ``name`` on ``asset`` (its description
    is the table's)."""
    spec = gate(name)
    assert spec.stage == asset.key.to_user_string(), (name, spec.stage)
    return dg.asset_check(
        asset=asset,
        name=name,
        description=spec.description,
        blocking=True,
        partitions_def=LEARNING_TARGETS,
        pool=STORE_POOL,
        **kw,
    )


def _decide(context: dg.AssetCheckExecutionContext, client: MemoryClient | None = None, **evidence: Any):
    """The check's result: the table's verdict for this check, from its inputs."""
    return result(context, gate(context.check_specs[0].name).verdict(evidence, client))


@_gate("coverage_sufficient", query_split)
def coverage_sufficient(context: dg.AssetCheckExecutionContext, query_split: SplitSummary) -> dg.AssetCheckResult:
    return _decide(context, query_split=query_split)


@_gate("baseline_replay_exact", query_split)
def baseline_replay_exact(context: dg.AssetCheckExecutionContext, query_split: SplitSummary) -> dg.AssetCheckResult:
    return _decide(context, query_split=query_split)


@_gate("offline_gate_passed", ranking_proposal)
def offline_gate_passed(
    context: dg.AssetCheckExecutionContext, ranking_proposal: LearningEvaluation
) -> dg.AssetCheckResult:
    return _decide(context, ranking_proposal=ranking_proposal)


@_gate("holdout_memory_unchanged", full_retrieval_holdout)
def holdout_memory_unchanged(
    context: dg.AssetCheckExecutionContext, full_retrieval_holdout: HoldoutOutcome
) -> dg.AssetCheckResult:
    return _decide(context, full_retrieval_holdout=full_retrieval_holdout)


@_gate("holdout_gate_passed", full_retrieval_holdout)
def holdout_gate_passed(
    context: dg.AssetCheckExecutionContext, full_retrieval_holdout: HoldoutOutcome
) -> dg.AssetCheckResult:
    return _decide(context, full_retrieval_holdout=full_retrieval_holdout)


@_gate(
    "profile_evidence_bound",
    candidate_profile,
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
        return _decide(
            context,
            client,
            candidate_profile=candidate_profile,
            ranking_proposal=ranking_proposal,
            full_retrieval_holdout=full_retrieval_holdout,
        )


@_gate("runtime_compatible", candidate_profile)
def runtime_compatible(
    context: dg.AssetCheckExecutionContext, candidate_profile: RankingProfile, prme_store: PrmeStoreResource
) -> dg.AssetCheckResult:
    with prme_store.client() as client:
        return _decide(context, client, candidate_profile=candidate_profile)


GATES = (
    coverage_sufficient,
    baseline_replay_exact,
    offline_gate_passed,
    holdout_gate_passed,
    holdout_memory_unchanged,
    profile_evidence_bound,
    runtime_compatible,
)
"""Every gate of ``gate_table.GATE_TABLE`` as an asset check, in its order: ``Definitions``
registers exactly these checks and the activation sensor requires every one of them."""

if tuple(key.name for g in GATES for key in g.check_keys) != tuple(g.name for g in GATE_TABLE):
    raise RuntimeError("prme_assets.checks.GATES must be the asset checks of gate_table.GATE_TABLE, in its order")

GATE_CHECKS: tuple[tuple[str, str], ...] = tuple(
    (key.asset_key.to_user_string(), key.name) for gate in GATES for key in gate.check_keys
)
"""(asset, check) of every gate in ``GATES``: what the activation sensor reads for a partition."""
