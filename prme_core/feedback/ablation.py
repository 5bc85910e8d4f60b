"""Controlled context ablation and context-presence assessment.

``ablate_context`` removes included entries from the exact packed bundle: no retrieval is
rerun, the freed budget is not refilled and every retained entry keeps its bytes (including its
``[ref]``). The frozen result binds the removed ids, both context hashes, the counterfactual
bundle and exact token accounting. This is an exact context-entry intervention, not deletion of
a memory from the bank (which could change traversal, cutoffs and what fills the budget).

``assess_context_presence`` turns one ablation, a saved answer citation and a caller's two
correctness judgments under a named reader/evaluator protocol into one of four tiers. The result
is for inspection: it is not persisted and nothing in ranking or retention consumes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, StrictBool, StringConstraints, model_validator

from prme_core.errors import InvalidInput
from prme_core.feedback.citations import AnswerCitationRecord
from prme_core.retrieval.packing import ContextBundle
from prme_core.types import MAX_LABEL_CHARS, FrozenModel, NonBlank, Sha256Hex
from prme_core.validation import check_label


class ContextAblation(FrozenModel):
    """The counterfactual of removing some included entries from one packed bundle."""

    schema_version: Literal[1] = 1
    semantics: Literal["exact_context_entry_removal"] = "exact_context_entry_removal"
    removed_node_ids: Annotated[tuple[UUID, ...], Field(min_length=1)]
    baseline_context_sha256: Sha256Hex
    counterfactual_context_sha256: Sha256Hex
    baseline_tokens_used: int = Field(ge=0)
    removed_tokens: int = Field(ge=0)
    counterfactual: ContextBundle

    @model_validator(mode="after")
    def _consistent(self) -> ContextAblation:
        removed = set(self.removed_node_ids)
        if len(removed) != len(self.removed_node_ids):
            raise ValueError("removed_node_ids must be unique")
        kept = set(self.counterfactual.included_ids())
        if removed & kept:
            raise ValueError("a removed entry is still in the counterfactual bundle")
        if not removed <= set(self.counterfactual.excluded_ids):
            raise ValueError("removed entries must be listed among the counterfactual's excluded ids")
        if self.counterfactual.context_sha256() != self.counterfactual_context_sha256:
            raise ValueError("counterfactual_context_sha256 does not match the counterfactual bundle")
        expected = self.baseline_tokens_used - self.removed_tokens if self.counterfactual.entries else 0
        if self.counterfactual.tokens_used != expected:
            raise ValueError(
                f"counterfactual uses {self.counterfactual.tokens_used} tokens; the accounting says {expected}"
            )
        return self


def _target_ids(node_ids: Any) -> tuple[UUID, ...]:
    if isinstance(node_ids, (str, bytes, UUID)) or not isinstance(node_ids, Sequence):
        raise InvalidInput("node_ids", "must be a non-empty list of node ids")
    if not node_ids:
        raise InvalidInput("node_ids", "name at least one included entry to remove")
    parsed = []
    for value in node_ids:
        try:
            parsed.append(value if isinstance(value, UUID) else UUID(str(value)))
        except ValueError:
            raise InvalidInput("node_ids", f"{value!r} is not a UUID") from None
    if len(set(parsed)) != len(parsed):
        raise InvalidInput("node_ids", "each target may be named only once")
    return tuple(parsed)


def ablate_context(bundle: ContextBundle, node_ids: Sequence[Any]) -> ContextAblation:
    """Remove the named included entries from ``bundle`` (which is not modified)."""
    if not isinstance(bundle, ContextBundle):
        raise InvalidInput("bundle", "must be the ContextBundle returned by retrieve()")
    targets = _target_ids(node_ids)
    included = set(bundle.included_ids())
    absent = [t for t in targets if t not in included]
    if absent:
        raise InvalidInput(
            "node_ids", f"{absent[0]} is not an included entry of this bundle; only packed entries can be removed"
        )
    removed = set(targets)
    kept = tuple(e for e in bundle.entries if e.node_id not in removed)
    removed_tokens = sum(e.token_cost for e in bundle.entries if e.node_id in removed)
    excluded = bundle.excluded_ids + tuple(e.node_id for e in bundle.entries if e.node_id in removed)
    if kept:
        used = bundle.tokens_used - removed_tokens
        counterfactual = bundle.model_copy(
            update={
                "entries": kept,
                "excluded_ids": excluded,
                "tokens_used": used,
                "budget_remaining": bundle.token_budget - used,
            }
        )
    else:
        counterfactual = bundle.model_copy(
            update={
                "entries": (),
                "excluded_ids": excluded,
                "header": "",
                "guidance": None,
                "tokens_used": 0,
                "budget_remaining": bundle.token_budget,
            }
        )
    # model_copy skips validation: re-validate so the counterfactual's token counts are recounted.
    counterfactual = ContextBundle.model_validate(counterfactual.model_dump())
    return ContextAblation(
        removed_node_ids=targets,
        baseline_context_sha256=bundle.context_sha256(),
        counterfactual_context_sha256=counterfactual.context_sha256(),
        baseline_tokens_used=bundle.tokens_used,
        removed_tokens=removed_tokens,
        counterfactual=counterfactual,
    )


PresenceTier = Literal["load_bearing", "cited_non_flipping", "misleading", "cited_wrong_noncuring"]
_TIERS: dict[tuple[bool, bool], tuple[PresenceTier, float]] = {
    (True, False): ("load_bearing", 1.0),
    (True, True): ("cited_non_flipping", 0.6),
    (False, True): ("misleading", -1.0),
    (False, False): ("cited_wrong_noncuring", 0.0),
}


class ContextPresenceCredit(FrozenModel):
    """Presence credit of one cited context entry under a fixed reader/evaluator protocol."""

    schema_version: Literal[1] = 1
    semantics: Literal["context_presence_credit_v1"] = "context_presence_credit_v1"
    request_id: UUID
    citation_id: UUID
    answer_id: str
    citation_method: str
    node_id: UUID
    protocol: Annotated[str, StringConstraints(min_length=1, max_length=MAX_LABEL_CHARS), NonBlank]
    baseline_context_sha256: Sha256Hex
    counterfactual_context_sha256: Sha256Hex
    baseline_correct: StrictBool
    counterfactual_correct: StrictBool
    tier: PresenceTier
    value: float = Field(ge=-1.0, le=1.0)

    @model_validator(mode="after")
    def _tier_follows(self) -> ContextPresenceCredit:
        if (self.tier, self.value) != _TIERS[(self.baseline_correct, self.counterfactual_correct)]:
            raise ValueError("tier and value do not follow from the two correctness judgments")
        return self


def assess_context_presence(
    ablation: ContextAblation,
    citation: AnswerCitationRecord,
    *,
    baseline_correct: Any,
    counterfactual_correct: Any,
    protocol: Any,
) -> ContextPresenceCredit:
    """Tier one cited target: correct→wrong load-bearing (1.0), correct→correct cited but
    non-flipping (0.6), wrong→correct misleading (−1.0), wrong→wrong noncuring (0.0)."""
    if not isinstance(ablation, ContextAblation) or not isinstance(citation, AnswerCitationRecord):
        raise InvalidInput("ablation", "needs a ContextAblation and a saved AnswerCitationRecord")
    if len(ablation.removed_node_ids) != 1:
        raise InvalidInput("ablation", "presence credit needs an ablation of exactly one target")
    target = ablation.removed_node_ids[0]
    if target not in citation.cited_node_ids:
        raise InvalidInput(
            "citation", f"{target} is not cited by answer {citation.answer_id}; presence credit requires a cited memory"
        )
    if citation.context_sha256 != ablation.baseline_context_sha256:
        raise InvalidInput(
            "citation",
            "the citation's context hash differs from the ablation's baseline: they describe different contexts",
        )
    for name, value in (("baseline_correct", baseline_correct), ("counterfactual_correct", counterfactual_correct)):
        if not isinstance(value, bool):
            raise InvalidInput(name, f"must be true or false, got {value!r}")
    check_label(protocol, "protocol", "must name the fixed reader/evaluator protocol (1..512 characters)")
    tier, value = _TIERS[(baseline_correct, counterfactual_correct)]
    return ContextPresenceCredit(
        request_id=citation.request_id,
        citation_id=citation.citation_id,
        answer_id=citation.answer_id,
        citation_method=citation.method,
        node_id=target,
        protocol=protocol,
        baseline_context_sha256=ablation.baseline_context_sha256,
        counterfactual_context_sha256=ablation.counterfactual_context_sha256,
        baseline_correct=baseline_correct,
        counterfactual_correct=counterfactual_correct,
        tier=tier,
        value=value,
    )
