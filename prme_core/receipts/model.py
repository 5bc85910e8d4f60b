"""Retrieval receipt models, schema versions 1–11, and their version-aware canonical form.

A receipt records what one retrieval returned: the exact request, owner, scope filter, clock,
scoring and packing configuration, candidate identities and content hashes (never text), the
score provenance that lets ``replay_ranking()`` recompute every score and the order, execution
parameters and feature identities, and context membership with the context hash.

Versions (RFC-0017). A field introduced by a version is omitted when serializing an older
receipt, parsing an older receipt fills the historical meaning, and an older receipt that
claims a later behaviour is rejected:

====  ===========================================================  ==========================
 v    adds                                                         older versions mean
====  ===========================================================  ==========================
 2    score provenance (per-candidate applied weights, trace,      no replay possible
      ordered adjustments) and the ranking (sort) policy
 3    the execution descriptor (parameters, feature identity)      no descriptor
 4    explicit packing.multipath_ordering (density | score)        density
 5    balanced ordering                                            (rejected before 5)
 6    packing.context_guidance_mode (off | temporal | all)         off
 7    packing.context_format (auditable | compact)                 auditable
 8    packing.episode_context_top_k/local_k/score_decay and the    0 / 8 / 0.95 (routing off)
      episode_decay operation
 9    scoring.current_update_multiplier, in the configuration and  1.0 (disabled)
      every applied weight set, and the current_update operation
10    interaction features (term_coverage, bigram_overlap,         features and weights 0;
      entity_match) in every trace (layout 2) and their weights    no pool
      in scoring and every weight set; packing.receipt_pool_depth
      and the scored candidate ``pool`` inline (``receipts.pool``)
11    the pool as a summary plus ``sha256`` of its packed columns, inline pool (version 10)
      which are stored beside the receipt's projection
====  ===========================================================  ==========================

Pool (version 10 inline, version 11 packed): the scored pool to ``packing.receipt_pool_depth``
members, bound by the receipt checksum (the inline arrays, or the packed columns' digest).
``retrieval.pool_replay`` re-ranks it under other weights; that is exact only when
``pool.complete`` (pool size ≤ depth) and ``pool.replayable`` — a truncated pool lacks members
other weights could promote. A version-11 receipt read back from storage carries its columns
only when read with them (``attach_pool``, which verifies the digest and the members).

Compactness: each candidate's trace is a positional array (order ``features.layout_for(v)
.trace_fields``: 11 numbers before version 10, 14 from it) and each
candidate names its applied weights by index into ``weight_sets`` (the distinct applied
ScoringWeights of the request), so a 50-candidate receipt stays small enough to encode,
hash and store on every retrieval.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_serializer, model_validator

from prme_core.canonical import EMPTY_SHA256, assert_finite, canonical_json
from prme_core.features import INTERACTION_NAMES, RECEIPT_LAYOUTS, TRACE_FEATURES, FeatureLayout, layout_for
from prme_core.receipts.pool import CandidatePool, PoolColumns, PoolSummary, pool_digest, replay_context
from prme_core.receipts.projection import PackedProjection, projection_digest
from prme_core.receipts.replay import ReplayResult, check_replay, replay
from prme_core.receipts.versioned import apply_history, candidate_dict, drop_newer, trace_by_layout
from prme_core.receipts.versions import (
    CURRENT_SCHEMA_VERSION,
    EXECUTION_SINCE,
    MIN_SCHEMA_VERSION,
    PACKED_POOL_SINCE,
    POOL_SINCE,
    PROVENANCE_SINCE,
    RANK_FUSION_SINCE,
    TRACE_FIELDS,
)
from prme_core.retrieval.config import PackingConfig, ScoringWeights
from prme_core.retrieval.formula import SortPolicy
from prme_core.types import FrozenModel, Owner, Sha256Hex, SortedUnique, UtcDatetime

# Packing fields by the version that introduced them, with the meaning older versions have.
_PACKING_HISTORY: tuple[tuple[str, int, Any], ...] = (
    ("multipath_ordering", 4, "density"),
    ("context_guidance_mode", 6, "off"),
    ("context_format", 7, "auditable"),
    ("episode_context_top_k", 8, 0),
    ("episode_context_local_k", 8, 8),
    ("episode_context_score_decay", 8, 0.95),
    ("receipt_pool_depth", POOL_SINCE, 0),
)
_SCORING_HISTORY: tuple[tuple[str, int, Any], ...] = (
    ("current_update_multiplier", 9, 1.0),
    *((name, POOL_SINCE, 0.0) for name in INTERACTION_NAMES),
)
_ADJUSTMENT_SINCE = {"neural_blend": 2, "session_decay": 2, "episode_decay": 8, "current_update": 9}

AdjustmentKind = Literal["neural_blend", "session_decay", "episode_decay", "current_update"]
Representation = Literal["full", "prose", "reference"]
RetrievalMode = Literal["hybrid", "lexical", "semantic"]


_TRACE_FIELDS_BY_WIDTH = {len(layout.trace_fields): layout.trace_fields for _, layout in RECEIPT_LAYOUTS}


class ScoreTrace(FrozenModel):
    """The recorded features of the node whose features produced a base score."""

    semantic: float
    lexical: float
    graph: float
    recency: float
    salience: float
    confidence: float
    epistemic_weight: float
    temporal_affinity: float
    node_type_boost: float = 1.0
    term_coverage: float = Field(default=0.0, ge=0.0, le=1.0)
    bigram_overlap: float = Field(default=0.0, ge=0.0, le=1.0)
    entity_match: float = Field(default=0.0, ge=0.0, le=1.0)
    path_score: float = 0.0
    base_score: float

    @model_validator(mode="before")
    @classmethod
    def _from_array(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            # A receipt names its traces by its version's layout first (``versioned.trace_by_layout``);
            # a bare array is read by whichever layout has its length.
            fields = _TRACE_FIELDS_BY_WIDTH.get(len(value))
            if fields is None:
                raise ValueError(f"a score trace holds {len(TRACE_FIELDS)} numbers in the order {TRACE_FIELDS}")
            return dict(zip(fields, value))
        return value

    @model_serializer(mode="plain")
    def _as_array(self) -> list[float]:
        return [getattr(self, f) for f in TRACE_FIELDS]

    def as_array(self, layout: FeatureLayout) -> list[float]:
        """The positional array a receipt of that layout records."""
        return [getattr(self, f) for f in layout.trace_fields]

    def has_interactions(self) -> bool:
        return any(getattr(self, f) != 0.0 for f in INTERACTION_NAMES)

    def feature_row(self, layout: FeatureLayout | None = None) -> tuple[float, ...]:
        """The formula-1 inputs in ``layout``'s order (default: the layout this model holds)."""
        return tuple(getattr(self, f) for f in (TRACE_FEATURES if layout is None else layout.features))


class ScoreAdjustment(FrozenModel):
    """One ordered post-score operation: ``neural_blend`` s = (1−c)·n + c·s; the rest s = s·c."""

    kind: AdjustmentKind
    coefficient: float
    neural_score: float | None = Field(default=None, ge=0.0, le=1.0)
    source_node_id: UUID | None = None

    @model_validator(mode="after")
    def _coherent(self) -> ScoreAdjustment:
        if self.kind == "neural_blend":
            if self.neural_score is None or not 0.0 <= self.coefficient <= 1.0:
                raise ValueError("neural_blend needs a neural_score and a coefficient in [0, 1]")
        elif self.neural_score is not None:
            raise ValueError(f"{self.kind} has no neural_score")
        if self.kind == "current_update" and not 1.0 <= self.coefficient <= 2.0:
            raise ValueError("current_update coefficients lie in [1, 2]")
        if self.kind in ("session_decay", "episode_decay") and not 0.0 < self.coefficient <= 1.0:
            raise ValueError(f"{self.kind} coefficients lie in (0, 1]")
        return self

    def canonical_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class RankFusion(FrozenModel):
    """Formula-2 inputs: channel ranks (None when off the channel) and pool-relative factors."""

    semantic_rank: int | None = Field(default=None, ge=1)
    lexical_rank: int | None = Field(default=None, ge=1)
    epistemic_factor: float = Field(ge=0.0, le=1.0)
    node_type_factor: float = Field(ge=0.0, le=1.0)
    temporal_factor: float = Field(ge=0.0, le=1.0)


class ScoreProvenance(FrozenModel):
    """How a candidate's score was produced: formula, source features, weights, operations."""

    formula_version: Literal[1, 2]
    base_node_id: UUID
    weights: int = Field(ge=0)
    trace: ScoreTrace
    adjustments: tuple[ScoreAdjustment, ...] = ()
    rank_fusion: RankFusion | None = None

    @model_validator(mode="after")
    def _formula_fields(self) -> ScoreProvenance:
        if (self.formula_version == 2) != (self.rank_fusion is not None):
            raise ValueError("formula 2 provenance records rank_fusion; formula 1 provenance does not")
        return self


class ReceiptCandidate(FrozenModel):
    """One returned candidate: identity, content hash, score, provenance, context membership."""

    node_id: UUID
    scope: str
    content_sha256: Sha256Hex
    score: float
    paths: tuple[str, ...] = ()
    cross_scope: bool = False
    provenance: ScoreProvenance | None = None
    reranker_score: float | None = Field(default=None, ge=0.0, le=1.0)
    in_context: bool = False
    context_position: int | None = Field(default=None, ge=0)
    representation: Representation | None = None
    has_content: bool = False
    token_cost: int = Field(default=0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _default_base_node(cls, data: Any) -> Any:
        # The canonical form omits provenance.base_node_id when it is the candidate itself.
        if (
            isinstance(data, dict)
            and isinstance(data.get("provenance"), dict)
            and "base_node_id" not in data["provenance"]
        ):
            data = {**data, "provenance": {**data["provenance"], "base_node_id": data.get("node_id")}}
        return data

    @model_validator(mode="after")
    def _membership(self) -> ReceiptCandidate:
        if self.in_context != (self.representation is not None) or self.in_context != (
            self.context_position is not None
        ):
            raise ValueError(f"candidate {self.node_id}: in_context, representation and context_position disagree")
        if self.has_content != (self.representation in ("full", "prose")):
            raise ValueError(f"candidate {self.node_id}: has_content needs an included text representation")
        if not self.in_context and self.token_cost:
            raise ValueError(f"candidate {self.node_id}: only included entries cost tokens")
        return self


class RetrievalExecution(FrozenModel):
    """Execution descriptor (v3+): request parameters and observed feature identity."""

    schema_version: Literal[1] = 1
    parameters: dict[str, Any]
    features: dict[str, Any]

    @field_validator("parameters", "features")
    @classmethod
    def _json_values(cls, value: dict[str, Any]) -> dict[str, Any]:
        assert_finite(value, "execution")  # free-form maps: nothing else checks their floats
        return value


class RetrievalReceipt(FrozenModel):
    """An immutable record of one retrieval; see the module docstring for versions."""

    schema_version: int = Field(ge=MIN_SCHEMA_VERSION, le=CURRENT_SCHEMA_VERSION, strict=True)
    request_id: UUID
    owner: Owner
    query: str
    reference_time: UtcDatetime
    scopes: Annotated[tuple[str, ...], Field(min_length=1), SortedUnique]
    retrieval_mode: RetrievalMode = "hybrid"
    result_limit: int = Field(ge=1)
    min_score: float
    time_from: UtcDatetime | None = None
    time_to: UtcDatetime | None = None
    scoring: ScoringWeights
    packing: PackingConfig
    weight_sets: tuple[ScoringWeights, ...] = ()
    ranking_policy: SortPolicy | None = None
    candidates: tuple[ReceiptCandidate, ...]
    context_sha256: Sha256Hex = EMPTY_SHA256
    context_tokens: int = Field(default=0, ge=0)
    execution: RetrievalExecution | None = None
    pool: CandidatePool | PoolSummary | None = None
    projection_sha256: Sha256Hex
    _columns: dict[str, list[Any]] | None = PrivateAttr(default=None)
    _packed: PackedProjection | None = PrivateAttr(default=None)
    _pool_columns: PoolColumns | None = PrivateAttr(default=None)
    _pool_packed: bytes | None = PrivateAttr(default=None)

    # --- version rules on the raw input -------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _version_rules(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            return data  # the strict field check rejects it with a clear message
        data = dict(data)
        data["packing"] = apply_history(data.get("packing"), _PACKING_HISTORY, version, "packing", PackingConfig)
        data["scoring"] = apply_history(data.get("scoring"), _SCORING_HISTORY, version, "scoring", ScoringWeights)
        sets = data.get("weight_sets")
        if isinstance(sets, (list, tuple)):
            data["weight_sets"] = [
                apply_history(ws, _SCORING_HISTORY, version, f"weight_sets[{i}]", ScoringWeights)
                for i, ws in enumerate(sets)
            ]
        candidates = data.get("candidates")
        if isinstance(candidates, (list, tuple)) and version >= MIN_SCHEMA_VERSION:
            data["candidates"] = [trace_by_layout(c, layout_for(version)) for c in candidates]
        return data

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> RetrievalReceipt:
        v = self.schema_version
        draft = bool((info.context or {}).get("prme_draft"))  # build() fills projection_sha256 next
        ids = [c.node_id for c in self.candidates]
        if len(set(ids)) != len(ids):
            raise ValueError("receipt candidate identities must be unique")
        if len(self.candidates) > self.result_limit:
            raise ValueError("a receipt cannot hold more candidates than its result limit")
        if any(c.score < self.min_score for c in self.candidates):
            raise ValueError("every returned candidate scores at least the receipt's min_score")
        if v < 5 and self.packing.multipath_ordering == "balanced":
            raise ValueError(f"balanced ordering requires a version 5 receipt; this is version {v}")
        if v < 4 and self.packing.multipath_ordering != "density":
            raise ValueError(f"version {v} receipts always mean density ordering")
        if v < 8 and self.packing.episode_context_top_k != 0:
            raise ValueError(f"episode routing requires a version 8 receipt; this is version {v}")
        if (v >= EXECUTION_SINCE) != (self.execution is not None):
            raise ValueError("receipts of version 3 or later carry an execution descriptor; earlier ones do not")
        if v < PROVENANCE_SINCE:
            if self.weight_sets or self.ranking_policy is not None or any(c.provenance for c in self.candidates):
                raise ValueError("version 1 receipts carry no score provenance or ranking policy")
        else:
            self._check_provenance()
        positions = sorted(c.context_position for c in self.candidates if c.context_position is not None)
        if positions != list(range(len(positions))):
            raise ValueError("context positions must be 0..n-1 over the included candidates")
        if not positions and self.context_sha256 != EMPTY_SHA256:
            raise ValueError("an empty context hashes to the SHA-256 of the empty string")
        if v < POOL_SINCE:
            if self.pool is not None:
                raise ValueError(f"a candidate pool requires a version {POOL_SINCE} receipt; this is version {v}")
            if any(c.provenance and c.provenance.trace.has_interactions() for c in self.candidates):
                raise ValueError(f"interaction features require a version {POOL_SINCE} receipt; this is version {v}")
        else:
            self._check_pool()
        if not draft and projection_digest(self) != self.projection_sha256:
            raise ValueError("projection_sha256 does not match the receipt's candidates")
        return self

    def _check_provenance(self) -> None:
        v = self.schema_version
        if self.ranking_policy is None or not self.weight_sets:
            raise ValueError(f"version {v} receipts record score provenance, weight sets and a ranking policy")
        for c in self.candidates:
            p = c.provenance
            if p is None:
                raise ValueError(f"candidate {c.node_id} lacks score provenance")
            if p.weights >= len(self.weight_sets):
                raise ValueError(f"candidate {c.node_id} names weight set {p.weights}, which does not exist")
            fusion = self.weight_sets[p.weights].fusion
            if (p.formula_version == 2) != (fusion == "rrf"):
                raise ValueError(
                    f"candidate {c.node_id}: formula version {p.formula_version} disagrees with fusion={fusion!r}"
                )
            if p.formula_version == 2 and v < RANK_FUSION_SINCE:
                raise ValueError(f"rank fusion provenance requires a version {RANK_FUSION_SINCE} receipt")
            for op in p.adjustments:
                if v < _ADJUSTMENT_SINCE[op.kind]:
                    raise ValueError(f"a version {v} receipt cannot contain a {op.kind} adjustment")
        check_replay(self)

    def _check_pool(self) -> None:
        pool, v = self.pool, self.schema_version
        if pool is None:
            raise ValueError(f"version {v} receipts record the scored candidate pool")
        if isinstance(pool, CandidatePool) != (v < PACKED_POOL_SINCE):
            form = "inline arrays" if v < PACKED_POOL_SINCE else "a summary and the digest of its packed columns"
            raise ValueError(f"a version {v} receipt records its pool as {form}")
        if pool.depth != self.packing.receipt_pool_depth:
            raise ValueError("pool.depth must equal packing.receipt_pool_depth")
        if pool.has_neighbours and self.packing.session_context_top_k == 0:
            raise ValueError("pool.neighbours are recorded only when session inheritance is on")
        if pool.members and self.packing.session_context_top_k > 0 and not pool.has_neighbours:
            raise ValueError("with session inheritance on, a pool records every member's session neighbours")
        if pool.size < len({c.provenance.base_node_id for c in self.candidates if c.provenance}):
            raise ValueError("pool.size is smaller than the number of distinct scored candidates it returned")
        if isinstance(pool, CandidatePool):
            self._check_members(PoolColumns.from_inline(pool))

    def _check_members(self, columns: PoolColumns) -> None:
        """Every returned candidate's score source is a member with the same trace features
        (when the pool is complete and replayable, it must be one)."""
        pool = self.pool
        assert pool is not None
        raw = columns.node_bytes
        member = {raw[16 * i : 16 * i + 16]: i for i in range(columns.members)}
        for c in self.candidates:
            p = c.provenance
            if p is None:
                continue
            at = member.get(p.base_node_id.bytes)
            if at is None:
                if pool.complete and pool.replayable:
                    raise ValueError(
                        f"candidate {c.node_id}: its score source {p.base_node_id} is not in the complete pool"
                    )
                continue
            if p.formula_version == 1 and p.trace.feature_row(columns.layout) != tuple(columns.features[at].tolist()):
                raise ValueError(f"candidate {c.node_id}: its trace features differ from pool member {at}")

    # --- the pool's columns -------------------------------------------------------------

    def pool_columns(self) -> PoolColumns | None:
        """The pool's arrays: parsed from the inline pool (version 10), or the packed columns
        this receipt was built or read with (version 11); None when it has none at hand."""
        if self._pool_columns is None and isinstance(self.pool, CandidatePool):
            self._pool_columns = PoolColumns.from_inline(self.pool, self.replay_context())
        return self._pool_columns

    def replay_context(self) -> dict[str, Any]:
        """What re-ranking this receipt's pool needs from the request (``receipts.pool.replay_context``)."""
        pool = self.pool
        assert pool is not None and self.execution is not None
        context = replay_context(
            scoring=self.scoring,
            multipliers=self.execution.parameters.get("ranking_multipliers"),
            packing=self.packing,
            min_score=self.min_score,
            result_limit=self.result_limit,
            current_state=pool.current_state,
            episodic=pool.episodic,
            complete=pool.complete,
            replayable=pool.replayable,
        )
        # the scoring as this receipt's version records it: a weight field added later is not in its pool
        context["scoring"] = drop_newer(context["scoring"], _SCORING_HISTORY, self.schema_version)
        return context

    def packed_pool(self) -> bytes | None:
        """The stored form of a version-11 pool (None before version 11 or when not at hand)."""
        return self._pool_packed

    def attach_pool(self, packed: bytes, columns: PoolColumns | None = None) -> RetrievalReceipt:
        """Bind a version-11 receipt to its packed pool columns: the digest must be the one the
        receipt records and the columns must agree with the summary and with every returned
        candidate's features. ``columns``, when the caller built them and packed them into
        ``packed`` (the pipeline, on every retrieval), are taken as built instead of parsed and
        checked again (every test pool-replays each new receipt); the digest and the members are
        still checked. Raises ``ValueError`` naming the mismatch; returns ``self``."""
        pool = self.pool
        if not isinstance(pool, PoolSummary):
            raise ValueError(f"a version {self.schema_version} receipt has no packed pool to attach")
        if pool_digest(packed) != pool.sha256:
            raise ValueError("the packed pool does not match the digest its receipt records")
        columns = PoolColumns.unpack(packed, layout_for(self.schema_version)) if columns is None else columns
        if not pool.matches(columns):
            raise ValueError("the packed pool's member, outside and neighbour counts disagree with its summary")
        if canonical_json(columns.replay) != canonical_json(self.replay_context()):
            raise ValueError("the packed pool's replay context disagrees with its receipt's request")
        self._check_members(columns)
        self._pool_columns, self._pool_packed = columns, bytes(packed)
        return self

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> RetrievalReceipt:
        """A copy; with ``update`` it drops the projection caches, which the changed fields may
        no longer match (the pool binding is kept: ``attach_pool`` checks it when it is made)."""
        copy = super().model_copy(update=update, deep=deep)
        if update:
            copy._columns = copy._packed = None
        return copy

    def __eq__(self, other: object) -> bool:
        # Equality is by field values; the private projection cache must not take part.
        return isinstance(other, RetrievalReceipt) and self.__dict__ == other.__dict__

    __hash__ = FrozenModel.__hash__

    @classmethod
    def build(cls, **fields: Any) -> RetrievalReceipt:
        """Validate a new receipt and fill in its ``projection_sha256`` (computed from the
        validated candidates, so every other invariant is checked exactly once). A version-11
        receipt takes its pool's packed columns as ``packed_pool`` and is bound to them."""
        packed = fields.pop("packed_pool", None)
        columns = fields.pop("pool_columns", None)
        receipt = cls.model_validate({**fields, "projection_sha256": "0" * 64}, context={"prme_draft": True})
        # The digest is set in place, on the object no one else holds yet: a copy with the field
        # updated (what ``model_copy`` does, also without validating) cost ~0.1 ms a retrieval,
        # and nothing cached on the draft is derived from the digest.
        receipt.__dict__["projection_sha256"] = projection_digest(receipt)
        if packed is not None:
            receipt.attach_pool(packed, columns)
        elif isinstance(receipt.pool, PoolSummary):
            raise ValueError("a version 11 receipt is built with its packed pool (packed_pool=...)")
        return receipt

    # --- canonical form -----------------------------------------------------------------

    def canonical_dict(self) -> dict[str, Any]:
        v = self.schema_version
        data = self.model_dump(mode="json", exclude={"candidates", "weight_sets", "execution", "pool"})
        data["packing"] = drop_newer(data["packing"], _PACKING_HISTORY, v)
        data["scoring"] = drop_newer(data["scoring"], _SCORING_HISTORY, v)
        for key in ("time_from", "time_to"):
            if data[key] is None:
                del data[key]
        layout = layout_for(v)
        data["candidates"] = [candidate_dict(c, layout) for c in self.candidates]
        if v >= PROVENANCE_SINCE:
            data["weight_sets"] = [drop_newer(w.model_dump(mode="json"), _SCORING_HISTORY, v) for w in self.weight_sets]
        else:
            del data["ranking_policy"]
        if v >= EXECUTION_SINCE:
            data["execution"] = self.execution.model_dump(mode="json")  # type: ignore[union-attr]
        if v >= POOL_SINCE:
            data["pool"] = self.pool.canonical_dict()  # type: ignore[union-attr]
        return data

    # --- replay -------------------------------------------------------------------------

    def replay_ranking(self) -> ReplayResult:
        """Recompute scores and order from the receipt alone (no model, graph or clock)."""
        return replay(self)

    def validate(self) -> None:  # type: ignore[override]
        """Raise ``ReplayMismatch`` unless replay reproduces every score and the order."""
        check_replay(self)

    def candidate(self, node_id: UUID) -> ReceiptCandidate | None:
        return next((c for c in self.candidates if c.node_id == node_id), None)
