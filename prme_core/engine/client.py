"""``MemoryClient``: the synchronous public API (a context manager that owns its store)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prme_core.engine.administration import Administration
from prme_core.errors import InvalidInput
from prme_core.feedback import ablation, citations, judgment, relevance
from prme_core.feedback.ablation import ContextAblation, ContextPresenceCredit
from prme_core.feedback.citations import AnswerCitationRecord
from prme_core.feedback.judgment import AgentJudgment
from prme_core.feedback.relevance import RelevanceRecord
from prme_core.learning import holdout, looks
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
    check_evaluation_arguments,
    parse_trials,
)
from prme_core.learning.holdout import HoldoutQuery, HoldoutQuerySpec, HoldoutRun
from prme_core.learning.offline import evaluate_learning
from prme_core.learning.proposal import LearningEvaluation
from prme_core.learning.reports import record_report
from prme_core.learning.snapshot import DEFAULT_MAX_RECORDS, FeedbackSnapshot, cut_snapshot
from prme_core.memory.bank import MemoryBank, MemoryLike, parse_uuid
from prme_core.memory.models import Edge, EdgeType, MemoryNode, Page
from prme_core.profiles import registry as profiles
from prme_core.profiles.model import RankingProfile, RankingProfileState, RankingProfileStatus
from prme_core.profiles.resolution import PointerResolver
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.store import get_receipt, get_receipts
from prme_core.retrieval.config import Fidelity
from prme_core.retrieval.embedding import EmbeddingProvider, HashedEmbedding
from prme_core.retrieval.execution import feature_identity_sha256
from prme_core.retrieval.multipliers import UNITY, RankingMultipliers
from prme_core.retrieval.packing import ContextBundle
from prme_core.retrieval.pipeline import RetrievalPipeline
from prme_core.retrieval.requests import RetrievalRequest, RetrievalResponse, RetrieveArguments, build_request
from prme_core.retrieval.reranker import Reranker, RerankerSettings
from prme_core.settings import EngineSettings
from prme_core.storage import Store, open_store
from prme_core.validation import check_limit, check_owner, check_query_groups, check_sha256, parse_model


class MemoryClient(Administration):
    """Synchronous access to one PRME store.

    ``MemoryClient()`` opens ``PRME_STORE_URL`` (default: the embedded DuckDB file
    ``.prme/prme.duckdb``); pass ``store_url`` or an open ``store`` to choose another.
    """

    def __init__(
        self,
        store_url: str | None = None,
        *,
        settings: EngineSettings | None = None,
        store: Store | None = None,
        embedder: EmbeddingProvider | None = None,
        reranker: Reranker | None = None,
        reranker_settings: RerankerSettings | None = None,
    ) -> None:
        self.settings = settings or EngineSettings.from_env(store_url=store_url)
        self._owns_store = store is None
        self.store = store if store is not None else open_store(self.settings.store_url)
        self.memory = MemoryBank(self.store, self.settings)
        self.pipeline = RetrievalPipeline(
            self.store,
            embedder=embedder or HashedEmbedding(),
            reranker=reranker,
            reranker_settings=reranker_settings,
            profile_resolver=PointerResolver(self.store).resolve,
            bm25=self.settings.bm25,
        )

    # --- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- memory -------------------------------------------------------------------------

    def store_memory(self, owner: str, item: MemoryLike) -> MemoryNode:
        """Store one memory (a string, a mapping or a ``MemoryInput``)."""
        return self.memory.store_one(owner, item)

    def store_batch(self, owner: str, items: Sequence[MemoryLike]) -> list[MemoryNode]:
        """Store up to 50,000 memories atomically."""
        return self.memory.store_batch(owner, items)

    def get(self, owner: str, node_id: Any) -> MemoryNode:
        """The current version of a node (``NodeNotFound`` for a missing or foreign id)."""
        return self.memory.get(owner, node_id)

    def history(self, owner: str, node_id: Any) -> list[MemoryNode]:
        """All versions of a node, oldest first."""
        return self.memory.history(owner, node_id)

    def edges(self, owner: str, node_id: Any) -> list[Edge]:
        """Edges touching a node."""
        return self.memory.edges(owner, node_id)

    def scan(
        self,
        owner: str,
        *,
        scopes: Sequence[str] | None = None,
        include_inactive: bool = False,
        cursor: str | None = None,
        limit: int = 100,
        node_types: Sequence[str] | None = None,
        created_from: Any = None,
        created_to: Any = None,
    ) -> Page:
        """One bounded page of the owner's nodes (filtered by scope, type and storage time)."""
        return self.memory.scan(
            owner,
            scopes=scopes,
            include_inactive=include_inactive,
            cursor=cursor,
            limit=limit,
            node_types=node_types,
            created_from=created_from,
            created_to=created_to,
        )

    def iterate(
        self, owner: str, *, scopes: Sequence[str] | None = None, include_inactive: bool = False, page_size: int = 500
    ) -> Iterator[MemoryNode]:
        """Every node of the owner, page by page."""
        return self.memory.iterate(owner, scopes=scopes, include_inactive=include_inactive, page_size=page_size)

    def link(
        self,
        owner: str,
        source_id: Any,
        target_id: Any,
        edge_type: EdgeType | str = EdgeType.RELATES_TO,
        *,
        weight: float = 1.0,
        metadata: Mapping[str, Any] | None = None,
    ) -> Edge:
        """Add a typed edge between two of the owner's nodes."""
        return self.memory.link(owner, source_id, target_id, edge_type, weight=weight, metadata=metadata)

    def supersede(self, owner: str, node_id: Any, replacement: MemoryLike) -> MemoryNode:
        """Replace a node with a new one; the old one becomes a superseded version."""
        return self.memory.supersede(owner, node_id, replacement)

    def archive(self, owner: str, node_id: Any) -> MemoryNode:
        """Archive a node (a new version; history kept)."""
        return self.memory.archive(owner, node_id)

    # --- retrieval ----------------------------------------------------------------------

    def retrieve(
        self,
        query: str,
        *,
        owner: str,
        scopes: Sequence[str] | None = None,
        reference_time: Any = None,
        limit: int = 20,
        min_score: float = 0.0,
        token_budget: int | None = None,
        time_from: Any = None,
        time_to: Any = None,
        event_time_from: Any = None,
        event_time_to: Any = None,
        min_fidelity: Fidelity | None = None,
        scoring: Mapping[str, Any] | Any = None,
        packing: Mapping[str, Any] | Any = None,
        ranking_multipliers: Mapping[str, float] | Any = None,
        include_cross_scope: bool = False,
        retrieval_mode: str = "hybrid",
        epistemic_mode: str = "all",
    ) -> RetrievalResponse:
        """Hybrid retrieval with a persisted, replayable receipt of the current schema version.

        The keyword arguments are ``retrieval.requests.RetrieveArguments`` (one declaration for
        this method, the HTTP route and the MCP tools; a test keeps this signature equal to it):
        ``scopes`` defaults to every configured scope, ``reference_time`` to now. Every argument
        is validated before any work; ``metadata.receipt_persisted`` says whether the receipt was
        stored.
        """
        arguments = {k: v for k, v in locals().items() if k in RetrieveArguments.model_fields}
        return self.pipeline.retrieve(self._retrieval_request(query, owner=owner, **arguments))

    def _retrieval_request(self, query: Any, *, owner: Any, **arguments: Any) -> RetrievalRequest:
        """What ``retrieve`` validates, without running it (``run_holdout`` checks every request
        first). ``arguments``: fields of ``RetrieveArguments``."""
        return build_request(
            owner,
            query,
            arguments,
            default_scopes=self.settings.scopes,
            default_scoring=self.settings.scoring,
            default_packing=self.settings.packing,
        )

    def get_receipt(self, request_id: Any, owner: str, *, with_pool: bool = False) -> RetrievalReceipt | None:
        """The saved receipt of a retrieval, or None for a missing or foreign request id. With
        ``with_pool`` a version-11 receipt is read with its packed pool (digest verified), so
        ``replay_pool`` can re-rank it."""
        if not isinstance(with_pool, bool):
            raise InvalidInput("with_pool", f"must be true or false, got {with_pool!r}")
        found = get_receipt(self.store, check_owner(owner), parse_uuid(request_id, "request_id"), with_pool=with_pool)
        return None if found is None else found[0]

    # --- feedback -----------------------------------------------------------------------

    def record_relevance(
        self,
        request_id: Any,
        labels: Mapping[Any, bool],
        *,
        owner: str,
        method: str,
        surface: str = "results",
        feedback_id: Any = None,
    ) -> RelevanceRecord:
        """Record boolean labels for members of a saved retrieval (idempotent by feedback_id).

        ``method`` is ``"explicit_user"`` or ``"structured_evaluation"``; ``surface`` is
        ``"results"`` (returned candidates) or ``"context"`` (included entries).
        """
        return relevance.record_relevance(
            self.store, request_id, labels, owner=owner, surface=surface, method=method, feedback_id=feedback_id
        )

    def record_agent_judgment(self, request_id: Any, used: Sequence[Any], *, owner: str) -> AgentJudgment:
        """An agent's judgment of a retrieval it answered from: ``used`` (node ids among the
        returned results) relevant, every other returned result not relevant; says whether
        learning can use it and why (one per retrieval; a retry returns the first)."""
        return judgment.record_agent_judgment(self.store, request_id, used, owner=owner)

    def get_relevance(self, feedback_id: Any, owner: str) -> RelevanceRecord | None:
        """A relevance record, or None for a missing or foreign feedback id."""
        return relevance.get_relevance(self.store, parse_uuid(feedback_id, "feedback_id"), owner)

    def list_relevance(self, owner: str, *, after: Any = None, limit: int = 100) -> list[RelevanceRecord]:
        """One page (1..1000) of the owner's relevance records, by feedback id."""
        return relevance.list_relevance(
            self.store, owner, after=None if after is None else parse_uuid(after, "after"), limit=limit
        )

    def record_answer_citations(
        self,
        request_id: Any,
        *,
        owner: str,
        answer_id: str,
        cited_node_ids: Any,
        method: str,
        answer_digest: str | None = None,
        citation_id: Any = None,
    ) -> AnswerCitationRecord:
        """Record which included memories an answer cited (idempotent by citation_id)."""
        return citations.record_answer_citations(
            self.store,
            request_id,
            owner=owner,
            answer_id=answer_id,
            cited_node_ids=cited_node_ids,
            method=method,
            answer_digest=answer_digest,
            citation_id=citation_id,
        )

    def get_answer_citations(self, citation_id: Any, owner: str) -> AnswerCitationRecord | None:
        return citations.get_answer_citations(self.store, parse_uuid(citation_id, "citation_id"), owner)

    def list_answer_citations(self, owner: str, *, after: Any = None, limit: int = 100) -> list[AnswerCitationRecord]:
        return citations.list_answer_citations(
            self.store, owner, after=None if after is None else parse_uuid(after, "after"), limit=limit
        )

    @staticmethod
    def ablate_context(bundle: ContextBundle, node_ids: Sequence[Any]) -> ContextAblation:
        """Remove included entries from a packed bundle without re-running retrieval."""
        return ablation.ablate_context(bundle, node_ids)

    @staticmethod
    def assess_context_presence(
        ablated: ContextAblation,
        citation: AnswerCitationRecord,
        *,
        baseline_correct: bool,
        counterfactual_correct: bool,
        protocol: str,
    ) -> ContextPresenceCredit:
        """Presence-credit tier of one cited, ablated entry (inspectable, never persisted)."""
        return ablation.assess_context_presence(
            ablated,
            citation,
            baseline_correct=baseline_correct,
            counterfactual_correct=counterfactual_correct,
            protocol=protocol,
        )

    # --- learning -----------------------------------------------------------------------

    def snapshot_feedback(self, owner: str, *, max_records: int = DEFAULT_MAX_RECORDS) -> FeedbackSnapshot:
        """Cut the owner's relevance records (one bounded query; fails past max_records)."""
        return cut_snapshot(self.store, owner, max_records=max_records)

    def evaluate_learning(
        self,
        owner: str,
        *,
        scopes: Sequence[str],
        surface: str = "results",
        config: LearningConfig | Mapping[str, Any] | None = None,
        query_groups: Mapping[Any, str] | None = None,
        max_records: int = DEFAULT_MAX_RECORDS,
        scope_set_only: bool = False,
    ) -> LearningEvaluation:
        """Snapshot the owner's feedback and evaluate a multiplier proposal for the exact scope
        set. Changes nothing: no weight, pointer or profile. ``scope_set_only`` cuts only that
        scope set's feedback, so the report names nothing of the owner's other scopes (what a
        scope-limited API key gets)."""
        owner = check_owner(owner)
        scope_set = self.memory.check_scopes(scopes)
        if surface not in ("results", "context"):
            raise InvalidInput("surface", f"must be 'results' or 'context', got {surface!r}")
        cfg = None if config is None else parse_model(LearningConfig, config, "config")
        check_query_groups(query_groups)
        snapshot = cut_snapshot(
            self.store, owner, max_records=max_records, scopes=scope_set if scope_set_only else None
        )
        report = evaluate_learning(
            snapshot, owner=owner, scopes=scope_set, surface=surface, config=cfg, query_groups=query_groups
        )
        record_report(self.store, report)  # evidence this store produced (a profile needs it)
        return report

    # --- full-retrieval holdout ---------------------------------------------------------

    def register_holdout_queries(
        self, owner: str, scopes: Sequence[str], queries: Sequence[HoldoutQuerySpec | Mapping[str, Any]]
    ) -> list[HoldoutQuery]:
        """Register held-out queries with their complete relevant sets (append-only, idempotent)."""
        return holdout.register_holdout_queries(self.store, owner, self.memory.check_scopes(scopes), queries)

    def list_holdout_queries(self, owner: str, scopes: Sequence[str]) -> list[HoldoutQuery]:
        """Active holdout queries for exactly this scope set."""
        return holdout.list_holdout_queries(self.store, owner, self.memory.check_scopes(scopes))

    def retire_holdout_queries(self, owner: str, scopes: Sequence[str], holdout_ids: Sequence[Any]) -> int:
        """Retire holdout queries (an append-only record); returns how many were newly retired."""
        return holdout.retire_holdout_queries(self.store, owner, self.memory.check_scopes(scopes), holdout_ids)

    def memory_artifact_digest(self, owner: str) -> str:
        """SHA-256 of the owner's complete memory state (every node version and edge)."""
        return holdout.memory_artifact_digest(self.store, owner)

    def run_holdout(
        self,
        owner: str,
        scopes: Sequence[str],
        *,
        candidate_multipliers: Any,
        baseline_multipliers: Any = None,
        excluded_query_digests: Any = frozenset(),
        limit_override: int | None = None,
    ) -> HoldoutRun:
        """Paired baseline/candidate retrievals of every active holdout query over frozen memory."""
        owner = check_owner(owner)
        return holdout.run_holdout(
            self.store,
            owner,
            self.memory.check_scopes(scopes),
            request_for=self._retrieval_request,
            retrieve=self.retrieve,
            candidate_multipliers=candidate_multipliers,
            baseline_multipliers=baseline_multipliers,
            excluded_query_digests=excluded_query_digests,
            limit_override=limit_override,
        )

    def evaluate_full_retrieval(
        self,
        trials: Sequence[FullRetrievalTrial | Mapping[str, Any]],
        *,
        owner: str,
        scopes: Sequence[str],
        proposal_input_checksum: str,
        memory_artifact_sha256: str,
        candidate_multipliers: Any,
        baseline_multipliers: Any = None,
        config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
        baseline_profile_id: Any = None,
    ) -> FullRetrievalEvaluation:
        """Evaluate paired trials whose receipts are read from this store (owner-checked). The
        evaluation is a recorded look at the scope set's holdout against ``baseline_profile_id``
        (the profile whose multipliers the baseline arm used; None: base scoring)."""
        arguments: dict[str, Any] = dict(
            owner=check_owner(owner),
            scopes=self.memory.check_scopes(scopes),
            proposal_input_checksum=proposal_input_checksum,
            memory_artifact_sha256=memory_artifact_sha256,
            candidate_multipliers=candidate_multipliers,
            baseline_multipliers=baseline_multipliers,
            config=config,
        )
        check_evaluation_arguments(**arguments)  # every argument before any receipt is read
        baseline_id = None if baseline_profile_id is None else parse_uuid(baseline_profile_id, "baseline_profile_id")
        parsed = parse_trials(trials)
        ids = [r for t in parsed for r in (t.baseline_request_id, t.candidate_request_id)]
        receipts = get_receipts(self.store, arguments["owner"], ids)
        return looks.evaluate_as_look(self.store, receipts, parsed, baseline_profile_id=baseline_id, **arguments)

    def evaluate_holdout(
        self,
        proposal: LearningEvaluation,
        *,
        config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
    ) -> FullRetrievalEvaluation:
        """Run the registered holdout for a proposal's owner and scope set and evaluate it.

        The baseline arm is what currently serves that scope set (the active profile's
        multipliers, or unity); the candidate arm uses the proposal's multipliers; holdout
        queries the proposal trained or validated on are refused. Every argument is validated
        before the first retrieval, so a refused call stores no receipt.
        """
        proposal = parse_model(LearningEvaluation, proposal, "proposal")
        cfg = parse_model(FullRetrievalEvaluationConfig, {} if config is None else config, "config")
        scopes = self.memory.check_scopes(proposal.scopes, "proposal.scopes")
        baseline_id, baseline = self.holdout_baseline(proposal.owner, scopes)
        run = self.run_holdout(
            proposal.owner,
            scopes,
            candidate_multipliers=proposal.multipliers,
            baseline_multipliers=baseline,
            excluded_query_digests=proposal.query_digests(),
        )
        return self.judge_holdout(run, proposal, baseline_id, cfg)

    def judge_holdout(
        self,
        run: holdout.HoldoutRun,
        proposal: LearningEvaluation,
        baseline_profile_id: Any,
        config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
    ) -> FullRetrievalEvaluation:
        """Evaluate a holdout run of ``proposal`` as a recorded look and keep the report: a
        proposal this store recorded decides at the version-4 level of its place among the
        partition's proposals (``looks.proposal_look``), any other at the version-3 level of
        the partition's looks."""
        facts = looks.proposal_look(self.store, proposal)
        look = self.holdout_look(run, proposal.input_checksum, baseline_profile_id, per_proposal=facts is not None)
        report = run.evaluate(proposal.input_checksum, config, look=look.look, proposal=facts)
        record_report(self.store, report)
        return report

    def holdout_look(
        self,
        run: holdout.HoldoutRun,
        proposal_input_checksum: str,
        baseline_profile_id: Any,
        *,
        per_proposal: bool = False,
    ) -> Any:
        """The store's record of this look at the holdout (its number sets the level the
        confirming test may spend); re-evaluating the identical run returns the same look.
        ``per_proposal``: numbered among the looks at that one proposal (version 4)."""
        return holdout.record_run_look(
            self.store,
            run,
            proposal_input_checksum=check_sha256(proposal_input_checksum, "proposal_input_checksum"),
            baseline_profile_id=None
            if baseline_profile_id is None
            else parse_uuid(baseline_profile_id, "baseline_profile_id"),
            per_proposal=per_proposal,
        )

    # --- ranking profiles ---------------------------------------------------------------

    def holdout_baseline(self, owner: str, scopes: Sequence[str]) -> tuple[Any, RankingMultipliers]:
        """(active profile id or None, its multipliers or unity): the baseline a new holdout uses."""
        active = profiles.active_profile(self.store, owner, self.memory.check_scopes(scopes))
        return (None, UNITY) if active is None else (active.profile_id, active.multipliers)

    def running_feature_identity(self) -> str:
        """SHA-256 of the feature identity this client's pipeline records in new receipts."""
        return feature_identity_sha256(self.pipeline.features_for_request())

    def _applicability(self, profile: RankingProfile) -> str | None:
        app = profile.application()
        return profiles.inapplicable_reason(
            app.feature_identity_sha256,
            app.base_scoring,
            running_features_sha=self.running_feature_identity(),
            running_scoring=self.settings.scoring,
        )

    def create_ranking_profile(
        self,
        proposal: LearningEvaluation,
        holdout: FullRetrievalEvaluation,
        *,
        owner: str,
        profile_id: Any = None,
        baseline_profile_id: Any = None,
    ) -> RankingProfile:
        """Persist an immutable profile from a positive proposal and holdout (does not activate)."""
        proposal = parse_model(LearningEvaluation, proposal, "proposal")
        holdout = parse_model(FullRetrievalEvaluation, holdout, "holdout")
        self.memory.check_scopes(holdout.scopes, "holdout.scopes")
        return profiles.create_profile(
            self.store, proposal, holdout, owner=owner, profile_id=profile_id, baseline_profile_id=baseline_profile_id
        )

    def activate_ranking_profile(
        self, profile_id: Any, *, owner: str, change_id: Any = None, reactivate: bool = True
    ) -> RankingProfileState:
        """Activate over the exact baseline the holdout used (stale → ``StaleProfileError``),
        after rechecking feature identity and base scoring against this pipeline. A known
        ``change_id`` returns the earlier record marked ``replayed`` (check ``superseded_by``);
        ``reactivate=False`` refuses a profile deactivated or rolled back away since it served."""
        return profiles.activate(
            self.store,
            profile_id,
            owner=owner,
            change_id=change_id,
            applicability=self._applicability,
            reactivate=reactivate,
        )

    def deactivate_ranking_profile(
        self, *, owner: str, scopes: Sequence[str], change_id: Any = None, expected_profile_id: Any = profiles.KEEP
    ) -> RankingProfileState:
        """Return the scope set to base scoring (a recorded state)."""
        return profiles.deactivate(
            self.store,
            owner=owner,
            scopes=self.memory.check_scopes(scopes),
            change_id=change_id,
            expected_profile_id=expected_profile_id,
        )

    def rollback_ranking_profile(
        self,
        profile_id: Any,
        *,
        owner: str,
        scopes: Sequence[str],
        change_id: Any = None,
        expected_profile_id: Any = profiles.KEEP,
    ) -> RankingProfileState:
        """Point the scope set at an earlier profile, or at base scoring with ``profile_id=None``."""
        return profiles.rollback(
            self.store,
            profile_id,
            owner=owner,
            scopes=self.memory.check_scopes(scopes),
            change_id=change_id,
            expected_profile_id=expected_profile_id,
            applicability=self._applicability,
        )

    def get_ranking_profile(self, profile_id: Any, owner: str) -> RankingProfileStatus | None:
        """A profile with whether it is active, or None for a missing or foreign id."""
        return profiles.profile_status(self.store, profile_id, owner)

    def list_ranking_profiles(self, owner: str, *, after: Any = None, limit: int = 100) -> list[RankingProfile]:
        return profiles.list_profiles(self.store, owner, after=after, limit=limit)

    def get_active_ranking_profile(self, owner: str, scopes: Sequence[str]) -> RankingProfile | None:
        return profiles.active_profile(self.store, owner, self.memory.check_scopes(scopes))

    def ranking_profile_history(
        self, owner: str, scopes: Sequence[str], *, limit: int = 100, before: Any = None
    ) -> list[RankingProfileState]:
        """Pointer changes of the scope set, newest first (paged by ``before``)."""
        return profiles.history(
            self.store,
            owner,
            self.memory.check_scopes(scopes),
            limit=check_limit(limit),
            before=None if before is None else parse_uuid(before, "before"),
        )

    def ranking_profile_at(self, owner: str, scopes: Sequence[str], at: Any) -> RankingProfileState | None:
        """The pointer change in force at time ``at`` (None: nothing had been activated)."""
        return profiles.served_at(self.store, owner, self.memory.check_scopes(scopes), at)
