"""The HTTP API (FastAPI): ``/v1`` routes over ``MemoryService``, documented at ``/docs`` and
``/openapi.json``, and the MCP streamable-HTTP transport at ``/mcp``.

Every ``/v1`` route but ``/v1/health`` needs ``Authorization: Bearer <key>``; the owner is the
key's. Request bodies are limited to ``max_body_bytes`` (413 above it). Errors are typed JSON
bodies (``prme_api.errors``): 401 key, 403 scope or owner, 404 id, 409 conflict or stale state
(with the current state), 413 body, 422 input (naming the field and the bound).
"""

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any
from uuid import UUID

import orjson
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prme_api import models as m
from prme_api.agent_tools import JudgeArgs
from prme_api.errors import error_response, validation_body
from prme_api.service import MemoryService
from prme_core.access.keys import Principal
from prme_core.errors import PrmeError
from prme_core.feedback.ablation import ContextAblation, ContextPresenceCredit
from prme_core.feedback.citations import AnswerCitationRecord
from prme_core.feedback.relevance import RelevanceRecord
from prme_core.learning.full_retrieval import FullRetrievalEvaluation
from prme_core.learning.holdout import HoldoutQuery
from prme_core.learning.proposal import LearningEvaluation
from prme_core.memory.erasure import DeletionRecord
from prme_core.memory.models import MemoryInput, MemoryNode
from prme_core.profiles.model import RankingProfile, RankingProfileState, RankingProfileStatus
from prme_core.receipts.model import RetrievalReceipt

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""8 MiB: a batch of about a thousand 8 KB memories; larger imports go in several batches."""
_LOCATIONS = ("body", "query", "path", "header")
_BEARER = HTTPBearer(auto_error=False, description="An API key made by `prme keys create`.")


def _ok(data: Any) -> Response:
    return Response(orjson.dumps(data), media_type="application/json")


def _error(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
    async def on_error(request: Request, exc: Exception) -> Response:
        status, body = error_response(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return _error(status, body, headers)

    async def on_request_validation(request: Request, exc: RequestValidationError) -> Response:
        problems = []
        for problem in exc.errors():
            loc = tuple(problem.get("loc", ()))
            if problem.get("type") == "json_invalid":
                where = f" at character {loc[1]}" if len(loc) > 1 else ""
                detail = (problem.get("ctx") or {}).get("error", "invalid JSON")
                problem, loc = {"msg": f"the request body is not valid JSON ({detail}{where})"}, ()
            problems.append({**problem, "loc": loc[1:] if loc and loc[0] in _LOCATIONS else loc})
        return _error(422, validation_body(problems))

    async def on_http(request: Request, exc: HTTPException) -> Response:
        body = {"error": {"type": "http_error", "message": str(exc.detail)}}
        return _error(exc.status_code, body, getattr(exc, "headers", None))

    app.add_exception_handler(PrmeError, on_error)
    app.add_exception_handler(ValidationError, on_error)
    app.add_exception_handler(RequestValidationError, on_request_validation)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, on_http)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, on_error)


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` (declared or streamed) with a typed 413 before
    any route runs; smaller bodies are read once and handed on unchanged."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, send: Send) -> None:
        body = {
            "error": {
                "type": "body_too_large",
                "field": "body",
                "message": f"body: the request body exceeds {self.max_bytes} bytes; send less per request",
                "bound": {"max_bytes": self.max_bytes},
            }
        }
        payload = orjson.dumps(body)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_bytes:
                await self._refuse(send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)


def _routes(service: MemoryService) -> APIRouter:
    async def principal(credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)]) -> Principal:
        return await service.authenticate(None if credentials is None else credentials.credentials)

    Caller = Annotated[Principal, Depends(principal)]
    r = APIRouter(prefix="/v1")

    @r.get("/health", tags=["service"], summary="Liveness (no key needed)")
    async def health() -> Response:
        return _ok({"status": "ok"})

    @r.get("/whoami", tags=["service"], summary="The key's owner, scope limit and expiry")
    async def whoami(p: Caller) -> Response:
        return _ok(await service.whoami(p, m.NoArguments()))

    # memories
    @r.post("/memories", tags=["memories"], response_model=MemoryNode, summary="Store one memory")
    async def store_memory(body: MemoryInput, p: Caller) -> Response:
        return _ok(await service.store_memory(p, body))

    @r.post(
        "/memories/batch", tags=["memories"], response_model=m.Items[MemoryNode], summary="Store memories atomically"
    )
    async def store_batch(body: m.StoreBatchRequest, p: Caller) -> Response:
        return _ok(await service.store_batch(p, body))

    @r.get("/memories", tags=["memories"], summary="A page of memories (by scope, type, storage time)")
    async def list_memories(q: Annotated[m.ListMemoriesQuery, Query()], p: Caller) -> Response:
        return _ok(await service.list_memories(p, q))

    @r.post("/memories/{node_id}/update", tags=["memories"], response_model=MemoryNode, summary="Supersede a memory")
    async def update_memory(node_id: UUID, body: m.MemoryContent, p: Caller) -> Response:
        return _ok(await service.update_memory(p, m.UpdateMemoryRequest(node_id=node_id, content=body.content)))

    @r.post("/memories/{node_id}/archive", tags=["memories"], response_model=MemoryNode, summary="Archive a memory")
    async def archive_memory(node_id: UUID, p: Caller) -> Response:
        return _ok(await service.archive_memory(p, m.NodeRef(node_id=node_id)))

    @r.delete("/memories/{node_id}", tags=["memories"], response_model=DeletionRecord, summary="Delete a memory")
    async def delete_memory(node_id: UUID, p: Caller) -> Response:
        return _ok(await service.delete_memory(p, m.NodeRef(node_id=node_id)))

    @r.post("/owner/forget", tags=["memories"], response_model=DeletionRecord, summary="Forget the key's owner")
    async def forget_owner(body: m.ForgetOwnerRequest, p: Caller) -> Response:
        return _ok(await service.forget_owner(p, body))

    @r.get("/memories/{node_id}", tags=["memories"], response_model=MemoryNode, summary="One memory")
    async def get_memory(node_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_memory(p, m.NodeRef(node_id=node_id)))

    # retrieval
    @r.post("/retrieve", tags=["retrieval"], response_model=m.RetrieveResponse, summary="Retrieve with a receipt")
    async def retrieve(body: m.RetrieveRequest, p: Caller) -> Response:
        return _ok(await service.retrieve(p, body))

    @r.get(
        "/retrievals/{request_id}", tags=["retrieval"], response_model=RetrievalReceipt, summary="A retrieval's receipt"
    )
    async def get_receipt(request_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_receipt(p, m.RequestRef(request_id=request_id)))

    # feedback
    @r.post("/relevance", tags=["feedback"], response_model=RelevanceRecord, summary="Record relevance labels")
    async def record_relevance(body: m.RecordRelevanceRequest, p: Caller) -> Response:
        return _ok(await service.record_relevance(p, body))

    @r.get("/relevance", tags=["feedback"], response_model=m.Items[RelevanceRecord], summary="A page of records")
    async def list_relevance(q: Annotated[m.Page, Query()], p: Caller) -> Response:
        return _ok(await service.list_relevance(p, q))

    @r.get("/relevance/{feedback_id}", tags=["feedback"], response_model=RelevanceRecord, summary="One record")
    async def get_relevance(feedback_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_relevance(p, m.FeedbackRef(feedback_id=feedback_id)))

    @r.post(
        "/answer-citations", tags=["feedback"], response_model=AnswerCitationRecord, summary="Record answer citations"
    )
    async def record_citations(body: m.RecordCitationsRequest, p: Caller) -> Response:
        return _ok(await service.record_answer_citations(p, body))

    @r.get("/answer-citations", tags=["feedback"], response_model=m.Items[AnswerCitationRecord], summary="A page")
    async def list_citations(q: Annotated[m.Page, Query()], p: Caller) -> Response:
        return _ok(await service.list_answer_citations(p, q))

    @r.get(
        "/answer-citations/{citation_id}", tags=["feedback"], response_model=AnswerCitationRecord, summary="One record"
    )
    async def get_citations(citation_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_answer_citations(p, m.CitationRef(citation_id=citation_id)))

    @r.post("/context/ablation", tags=["feedback"], response_model=ContextAblation, summary="Ablate context entries")
    async def ablate(body: m.AblateContextRequest, p: Caller) -> Response:
        return _ok(await service.ablate_context(p, body))

    @r.post(
        "/context/presence", tags=["feedback"], response_model=ContextPresenceCredit, summary="Context presence credit"
    )
    async def presence(body: m.AssessPresenceRequest, p: Caller) -> Response:
        return _ok(await service.assess_context_presence(p, body))

    # learning and holdout
    @r.post(
        "/learning/evaluate", tags=["learning"], response_model=LearningEvaluation, summary="Offline proposal (gate 1)"
    )
    async def evaluate_learning(body: m.EvaluateLearningRequest, p: Caller) -> Response:
        return _ok(await service.evaluate_learning(p, body))

    @r.post("/holdout/queries", tags=["learning"], response_model=m.Items[HoldoutQuery], summary="Register queries")
    async def register_holdout(body: m.RegisterHoldoutRequest, p: Caller) -> Response:
        return _ok(await service.register_holdout_queries(p, body))

    @r.get("/holdout/queries", tags=["learning"], response_model=m.Items[HoldoutQuery], summary="Active queries")
    async def list_holdout(q: Annotated[m.ScopesQuery, Query()], p: Caller) -> Response:
        return _ok(await service.list_holdout_queries(p, q))

    @r.post("/holdout/queries/retire", tags=["learning"], response_model=m.Retired, summary="Retire queries")
    async def retire_holdout(body: m.RetireHoldoutRequest, p: Caller) -> Response:
        return _ok(await service.retire_holdout_queries(p, body))

    @r.post(
        "/learning/holdout",
        tags=["learning"],
        response_model=FullRetrievalEvaluation,
        summary="Run and evaluate the full-retrieval holdout (gate 2)",
    )
    async def evaluate_holdout(body: m.EvaluateHoldoutRequest, p: Caller) -> Response:
        return _ok(await service.evaluate_holdout(p, body))

    # ranking profiles (fixed paths before /profiles/{profile_id})
    @r.post("/profiles", tags=["profiles"], response_model=RankingProfile, summary="Create a profile")
    async def create_profile(body: m.CreateProfileRequest, p: Caller) -> Response:
        return _ok(await service.create_ranking_profile(p, body))

    @r.get("/profiles", tags=["profiles"], response_model=m.Items[RankingProfile], summary="A page of profiles")
    async def list_profiles(q: Annotated[m.Page, Query()], p: Caller) -> Response:
        return _ok(await service.list_ranking_profiles(p, q))

    @r.get("/profiles/active", tags=["profiles"], summary="The profile serving a scope set ({'profile': null}: none)")
    async def active_profile(q: Annotated[m.ScopesQuery, Query()], p: Caller) -> Response:
        return _ok(await service.get_active_ranking_profile(p, q))

    @r.get(
        "/profiles/history",
        tags=["profiles"],
        response_model=m.History[RankingProfileState],
        summary="Pointer changes, newest first",
    )
    async def profile_history(q: Annotated[m.HistoryQuery, Query()], p: Caller) -> Response:
        return _ok(await service.ranking_profile_history(p, q))

    @r.get("/profiles/as-of", tags=["profiles"], summary="The pointer change in force at `at` ({'state': null}: none)")
    async def profile_as_of(q: Annotated[m.AsOfQuery, Query()], p: Caller) -> Response:
        return _ok(await service.ranking_profile_at(p, q))

    @r.post("/profiles/deactivate", tags=["profiles"], response_model=RankingProfileState, summary="Base scoring")
    async def deactivate(body: m.DeactivateRequest, p: Caller) -> Response:
        return _ok(await service.deactivate_ranking_profile(p, body))

    @r.post("/profiles/rollback", tags=["profiles"], response_model=RankingProfileState, summary="Serve an earlier one")
    async def rollback(body: m.RollbackRequest, p: Caller) -> Response:
        return _ok(await service.rollback_ranking_profile(p, body))

    @r.get("/profiles/{profile_id}", tags=["profiles"], response_model=RankingProfileStatus, summary="One profile")
    async def get_profile(profile_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_ranking_profile(p, m.ProfileRef(profile_id=profile_id)))

    @r.post(
        "/profiles/{profile_id}/activate", tags=["profiles"], response_model=RankingProfileState, summary="Activate"
    )
    async def activate(profile_id: UUID, body: m.ActivateBody, p: Caller) -> Response:
        request = m.ActivateRequest(profile_id=profile_id, change_id=body.change_id, reactivate=body.reactivate)
        return _ok(await service.activate_ranking_profile(p, request))

    @r.post(
        "/judgments",
        tags=["feedback"],
        summary="An agent's judgment of a retrieval it answered from (used: relevant; shown, unused: not)",
    )
    async def judge(body: JudgeArgs, p: Caller) -> Response:
        return _ok(await service.agent_judge(p, body))

    # keys (operator keys only; the keys of the operator key's own owner)
    @r.post("/keys", tags=["keys"], summary="Make an API key for this owner (the secret is shown once)")
    async def create_key(body: m.CreateKeyRequest, p: Caller) -> Response:
        return _ok(await service.create_api_key(p, body))

    @r.get("/keys", tags=["keys"], summary="This owner's API keys (never their secrets)")
    async def list_keys(p: Caller) -> Response:
        return _ok(await service.list_api_keys(p, m.NoArguments()))

    @r.delete("/keys/{key_id}", tags=["keys"], summary="Revoke one of this owner's API keys")
    async def revoke_key(key_id: str, p: Caller) -> Response:
        return _ok(await service.revoke_api_key(p, m.KeyRef(key_id=key_id)))

    return r


def create_app(
    service: MemoryService, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, mcp: bool = True, version: str = ""
) -> FastAPI:
    """The ASGI app: ``/v1`` over ``service`` and, with ``mcp``, MCP streamable HTTP at ``/mcp``."""
    manager = None
    if mcp:
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

        from prme_api.mcp import bearer_credential, build_server

        manager = StreamableHTTPSessionManager(
            app=build_server(service, bearer_credential, version=version),
            stateless=True,
            json_response=True,
            max_request_body_size=max_body_bytes,
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if manager is None:
            yield
            return
        async with manager.run():
            yield

    app = FastAPI(
        title="PRME Learning",
        version=version or "0.1.0",
        summary="Memory for LLM applications: retrieval with receipts, feedback and evaluated ranking profiles.",
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    _install_error_handlers(app)
    app.include_router(_routes(service))
    if manager is not None:
        app.mount("/mcp", StreamableHTTPASGIApp(manager))
    return app
