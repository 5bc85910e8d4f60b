"""One mapping from an error to an HTTP status and a typed JSON body, used by both surfaces.

Bodies read ``{"error": {"type": ..., "message": ..., "field"?: ..., "bound"?: ...}}``; ``ErrorBody``
is their schema, named by every error response the HTTP API documents. A missing, foreign or
out-of-scope id gives the same 404 body (the resource kind, never whose it is), so a caller
cannot tell another owner's ids from ids that do not exist.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from prme_core.errors import (
    ApiKeyNotFound,
    CanonicalFormError,
    HoldoutIntegrityError,
    HoldoutOverlapsTraining,
    HoldoutQueryNotFound,
    IdempotencyConflict,
    IntegrityError,
    InvalidEvidence,
    InvalidInput,
    MemoryChangedDuringHoldout,
    MissingEvidence,
    NodeNotFound,
    NotFound,
    PairBudgetExceeded,
    PrmeError,
    ProfileInapplicable,
    ProfileNotFound,
    ReactivationRefused,
    ReceiptNotFound,
    RoleForbidden,
    ScopeForbidden,
    SnapshotTooLarge,
    StaleProfileError,
    StoreUnavailable,
    Unauthenticated,
    UnsupportedOperation,
)

log = logging.getLogger("prme_api")

ErrorType = Literal[
    "unauthenticated",
    "scope_forbidden",
    "role_forbidden",
    "owner_mismatch",
    "not_found",
    "stale_state",
    "no_op_transition",
    "idempotency_conflict",
    "reactivation_refused",
    "profile_inapplicable",
    "holdout_overlaps_training",
    "memory_changed",
    "missing_evidence",
    "body_too_large",
    "invalid_json",
    "invalid_input",
    "snapshot_too_large",
    "pair_budget_exceeded",
    "invalid_evidence",
    "holdout_invalid",
    "unsupported",
    "http_error",
    "integrity_error",
    "internal_error",
    "store_unavailable",
]
"""Every ``error.type`` a response can carry (``_STATUS`` below, plus the HTTP layer's own)."""

Scalar = int | float | str | bool


class ErrorProblem(BaseModel):
    """One problem of a refused request (422 ``invalid_input``: every field at fault)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str = Field(description="The field at fault, as a dotted path (`body` for the whole body).")
    message: str
    bound: dict[str, Scalar] | None = Field(default=None, description='The limit it broke, e.g. `{"ge": 1}`.')


class ErrorDetail(BaseModel):
    """What went wrong: ``type`` and ``message`` always, the other fields where they apply."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: ErrorType = Field(description="What kind of error; stable, for programs to branch on.")
    message: str = Field(description="For people: names the field, the bound and what to do next.")
    field: str | None = Field(default=None, description="The request field at fault, as a dotted path.")
    bound: dict[str, Scalar] | None = Field(default=None, description="The limit a value broke.")
    problems: list[ErrorProblem] | None = Field(
        default=None, description="422 `invalid_input` from request validation: every problem, the first one above."
    )
    resource: str | None = Field(
        default=None, description="404: the kind of record not found (never whose it is), e.g. `memory`."
    )
    reason: Literal["missing", "malformed", "unknown", "revoked", "expired"] | None = Field(
        default=None, description="401: why the API key was refused."
    )
    role: str | None = Field(default=None, description="403 `role_forbidden`: the key's role.")
    needed_role: str | None = Field(default=None, description="403 `role_forbidden`: the role the operation needs.")
    current_state: dict[str, Any] | None = Field(
        default=None,
        description="409 `stale_state` / `no_op_transition`: the scope set's current pointer change (null: none yet).",
    )


class ErrorBody(BaseModel):
    """Every error response: ``{"error": {"type": ..., "message": ..., ...}}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error: ErrorDetail


class ResourceNotFound(NotFound):
    """No such record for this API key (missing, another owner's, or outside the key's scopes)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(f"{kind} not found for this API key")


class OwnerMismatch(PrmeError):
    """A submitted report belongs to another owner than the API key's."""

    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(f"{field}: belongs to another owner than this API key's; the owner always comes from the key")


class InvalidJson(InvalidInput):
    """A request body that is not one JSON text in UTF-8 (RFC 8259): undecodable bytes, a byte
    order mark, malformed JSON, a key repeated in one object, or nesting deeper than ``bound``."""

    def __init__(self, field: str, message: str, bound: dict[str, int] | None = None) -> None:
        self.bound = bound
        super().__init__(field, message)


class StaleState(PrmeError):
    """A pointer change expected another state; carries the pointer's current change."""

    def __init__(self, cause: PrmeError, current: dict[str, Any] | None) -> None:
        self.cause = cause
        self.current = current
        super().__init__(str(cause))


_NOT_FOUND_KINDS: tuple[tuple[type[NotFound], str], ...] = (
    (NodeNotFound, "memory"),
    (ReceiptNotFound, "retrieval receipt"),
    (ProfileNotFound, "ranking profile"),
    (HoldoutQueryNotFound, "holdout query"),
    (ApiKeyNotFound, "api key"),
)

# (error class, HTTP status, body type), most specific first.
_STATUS: tuple[tuple[type[BaseException], int, str], ...] = (
    (Unauthenticated, 401, "unauthenticated"),
    (ScopeForbidden, 403, "scope_forbidden"),
    (RoleForbidden, 403, "role_forbidden"),
    (OwnerMismatch, 403, "owner_mismatch"),
    (NotFound, 404, "not_found"),
    (StaleState, 409, "stale_state"),
    (IdempotencyConflict, 409, "idempotency_conflict"),
    (ReactivationRefused, 409, "reactivation_refused"),
    (ProfileInapplicable, 409, "profile_inapplicable"),
    (HoldoutOverlapsTraining, 409, "holdout_overlaps_training"),
    (MemoryChangedDuringHoldout, 409, "memory_changed"),
    (MissingEvidence, 409, "missing_evidence"),
    (InvalidJson, 422, "invalid_json"),
    (InvalidInput, 422, "invalid_input"),
    (CanonicalFormError, 422, "invalid_input"),
    (SnapshotTooLarge, 422, "snapshot_too_large"),
    (PairBudgetExceeded, 422, "pair_budget_exceeded"),
    (InvalidEvidence, 422, "invalid_evidence"),
    (HoldoutIntegrityError, 422, "holdout_invalid"),
    (UnsupportedOperation, 422, "unsupported"),
    (StoreUnavailable, 503, "store_unavailable"),
    (IntegrityError, 500, "integrity_error"),
)


def validation_body(problems: list[dict[str, Any]], *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The 422 body of pydantic problems: the first one's field, message and bound, then all."""
    listed = []
    for problem in problems:
        loc = [str(p) for p in problem.get("loc", ()) if str(p) not in skip]
        entry = {"field": ".".join(loc) or "body", "message": _message(problem.get("msg", "invalid value"))}
        bound = {k: v for k, v in (problem.get("ctx") or {}).items() if isinstance(v, (int, float, str, bool))}
        if bound:
            entry["bound"] = bound
        listed.append(entry)
    first = listed[0] if listed else {"field": "body", "message": "invalid request"}
    return {
        "error": {
            "type": "invalid_input",
            **first,
            "message": f"{first['field']}: {first['message']}",
            "problems": listed,
        }
    }


def _message(text: str) -> str:
    return text[len("Value error, ") :] if text.startswith("Value error, ") else text


def error_response(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of an error raised by an operation."""
    if isinstance(exc, ValidationError):
        return 422, validation_body(exc.errors(include_url=False))
    for cls, status, kind in _STATUS:
        if isinstance(exc, cls):
            return status, {"error": _details(exc, kind)}
    log.exception("unexpected error in an API operation", exc_info=exc)
    return 500, {"error": {"type": "internal_error", "message": "the server failed; see its log"}}


def _details(exc: BaseException, kind: str) -> dict[str, Any]:
    if isinstance(exc, NotFound):
        resource = exc.kind if isinstance(exc, ResourceNotFound) else _kind_of(exc)
        return {"type": kind, "resource": resource, "message": f"{resource} not found for this API key"}
    body: dict[str, Any] = {"type": kind, "message": str(exc)}
    field = getattr(exc, "field", None)
    if field:
        body["field"] = field
    if isinstance(exc, InvalidJson) and exc.bound:
        body["bound"] = exc.bound
    if isinstance(exc, Unauthenticated):
        body["reason"] = exc.reason
    if isinstance(exc, RoleForbidden):
        body["role"], body["needed_role"] = exc.role, exc.needed
    if isinstance(exc, StaleState):
        body["type"] = "stale_state" if isinstance(exc.cause, StaleProfileError) else "no_op_transition"
        body["current_state"] = exc.current
    if isinstance(exc, SnapshotTooLarge):
        body["field"] = "max_records"
    return body


def _kind_of(exc: NotFound) -> str:
    return next((kind for cls, kind in _NOT_FOUND_KINDS if isinstance(exc, cls)), "record")


__all__ = [
    "ErrorBody",
    "ErrorDetail",
    "ErrorProblem",
    "ErrorType",
    "InvalidJson",
    "OwnerMismatch",
    "ResourceNotFound",
    "StaleState",
    "error_response",
    "validation_body",
]
