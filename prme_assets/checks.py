"""All gates: blocking, partitioned asset checks that only enforce ``prme_core`` verdicts.

Every check returns a result (a gate that cannot be evaluated fails), with the facts of its
verdict, ``outcome``, ``summary`` and ``reason`` as metadata, and each profile it names as a link
to the HTTP API route that serves it. An integrity failure is an ERROR-severity failure: the
step fails, the partition's downstream stages do not run, the run fails, and the run records the
outcome. An expected "no" (not enough evidence, no improvement) is a WARN failure: a warning in
the UI, still ``passed=False`` for the activation sensor, while the next stage declines and the
run ends successfully with the later stages skipped (``prme_assets.outcome``).
"""

import inspect
from typing import Any

import dagster as dg

from prme_assets.gate_table import GATE_TABLE, Gate
from prme_assets.holdout import full_retrieval_holdout
from prme_assets.metadata import facts, profile_links
from prme_assets.outcome import Decided, record_outcome, severity
from prme_assets.partitions import LEARNING_TARGETS
from prme_assets.profile import candidate_profile
from prme_assets.proposal import ranking_proposal
from prme_assets.resources import STORE_POOL, PrmeStoreResource, api_url_from_env
from prme_assets.split import query_split
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.stages import HoldoutOutcome, SplitSummary
from prme_core.profiles.model import RankingProfile


def result(context: dg.AssetCheckExecutionContext, decided: Decided) -> dg.AssetCheckResult:
    if decided.verdict.outcome == "integrity_failure":
        record_outcome(context, decided)
    return gate_result(decided)


def gate_result(decided: Decided) -> dg.AssetCheckResult:
    """A gate's verdict as a check result (the batched learning job records the same, per
    partition): WARN when it is an expected "no", ERROR for an integrity failure."""
    verdict = decided.verdict
    return dg.AssetCheckResult(
        passed=verdict.passed,
        severity=severity(verdict),
        description=verdict.description,
        metadata={
            **facts(
                {
                    **verdict.facts,
                    "outcome": verdict.outcome,
                    "summary": decided.summary,
                    "reason": verdict.description,
                }
            ),
            **profile_links(verdict.facts, api_url_from_env()),
        },
    )


STAGE_ASSETS = {
    "query_split": (query_split, SplitSummary),
    "ranking_proposal": (ranking_proposal, LearningEvaluation),
    "full_retrieval_holdout": (full_retrieval_holdout, HoldoutOutcome),
    "candidate_profile": (candidate_profile, RankingProfile),
}
"""Each checked stage's asset and output type."""


def _check(spec: Gate) -> dg.AssetChecksDefinition:
    """The asset check of a table gate: a blocking, partitioned check on its stage that loads
    every stage output the gate reads (and the store, when it reads it) and returns the verdict.
    Its signature is built from the table, so Dagster loads exactly those inputs."""
    asset, _ = STAGE_ASSETS[spec.stage]
    param = inspect.Parameter
    params = [param("context", param.POSITIONAL_OR_KEYWORD, annotation=dg.AssetCheckExecutionContext)]
    params += [param(name, param.POSITIONAL_OR_KEYWORD, annotation=STAGE_ASSETS[name][1]) for name in spec.reads]
    if spec.needs_store:
        params.append(param("prme_store", param.POSITIONAL_OR_KEYWORD, annotation=PrmeStoreResource))

    def check(context: dg.AssetCheckExecutionContext, **inputs: Any) -> dg.AssetCheckResult:
        store: PrmeStoreResource | None = inputs.pop("prme_store", None)
        if store is None:
            return result(context, spec.decided(inputs))
        with store.client() as client:
            return result(context, spec.decided(inputs, client))

    check.__signature__ = inspect.Signature(params, return_annotation=dg.AssetCheckResult)  # type: ignore[attr-defined]
    check.__name__ = check.__qualname__ = spec.name
    return dg.asset_check(
        asset=asset,
        name=spec.name,
        description=spec.description,
        blocking=True,
        partitions_def=LEARNING_TARGETS,
        pool=STORE_POOL,
        additional_ins={name: dg.AssetIn(name) for name in spec.reads[1:]} or None,
    )(check)


GATES = tuple(_check(spec) for spec in GATE_TABLE)
"""Every gate of ``gate_table.GATE_TABLE`` as an asset check, in its order: ``Definitions``
registers exactly these checks and the activation sensor requires every one of them."""

GATE_CHECKS: tuple[tuple[str, str], ...] = tuple(
    (key.asset_key.to_user_string(), key.name) for gate in GATES for key in gate.check_keys
)
"""(asset, check) of every gate in ``GATES``: what the activation sensor reads for a partition."""
