"""The HTTP API (FastAPI): ``/v1`` routes over ``MemoryService``, documented at ``/openapi.json``,
``/docs`` and ``/redoc`` (Swagger UI and ReDoc served from the ``fastapi-offline`` package's
files, so the pages work with no network), and the MCP streamable-HTTP transport at ``/mcp``.

Every operation's description names the key it needs (from the service method's role), and its
error responses name the ``ErrorBody`` schema; request bodies carry examples that validate
(``models.REQUEST_EXAMPLES``).

Every ``/v1`` route but ``/v1/health`` needs ``Authorization: Bearer <key>``; the owner is the
key's. Request bodies are limited to ``max_body_bytes`` (413 above it) and read strictly: one JSON
text in UTF-8 without repeated keys, whose values have the JSON types the schema names (see
``StrictJsonRoute``). Errors are typed JSON bodies (``prme_api.errors``): 401 key, 403 role, scope
or owner, 404 id, 409 conflict or stale state (with the current state), 413 body, 422 input
(naming the field and the bound; ``invalid_json`` for a body that is no UTF-8 JSON text), 503 store.
"""

import codecs
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any, TypeVar
from uuid import UUID

import orjson
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline
from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prme_api import models as m
from prme_api.agent_tools import JudgeArgs
from prme_api.errors import ErrorBody, InvalidJson, error_response, validation_body
from prme_api.service import MemoryService, role_of
from prme_core.access.keys import Principal
from prme_core.errors import PrmeError
from prme_core.feedback.ablation import ContextAblation, ContextPresenceCredit
from prme_core.feedback.citations import AnswerCitationRecord
from prme_core.feedback.relevance import RelevanceRecord
from prme_core.learning.full_retrieval import FullRetrievalEvaluation
from prme_core.learning.holdout import MAX_QUERIES_PER_CALL, HoldoutQuery
from prme_core.learning.proposal import LearningEvaluation
from prme_core.memory.bank import MAX_BATCH_NODES
from prme_core.memory.erasure import DeletionRecord
from prme_core.memory.models import MemoryInput, MemoryNode
from prme_core.profiles.model import RankingProfile, RankingProfileState, RankingProfileStatus
from prme_core.receipts.model import RetrievalReceipt
from prme_core.validation import MAX_NESTING_DEPTH

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
            problems.append({**problem, "loc": loc[1:] if loc and loc[0] in _LOCATIONS else loc, "msg": _said(problem)})
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


# --- strict JSON bodies -------------------------------------------------------------------------
# A /v1 body is one JSON text in UTF-8 (RFC 8259) whose values have the JSON types the schema
# names: read_json_body checks the bytes before FastAPI parses them (StrictJsonRoute), and every
# body parameter is declared StrictJson[Model], which validates the parsed value strictly in JSON
# mode after the model's own checks (so "0.5" is no number, 1 no boolean and 1700000000 no time,
# while UUIDs, times and enums still arrive as the strings JSON has for them).

MAX_BODY_DEPTH = 8 * MAX_NESTING_DEPTH
"""How deep a request body's objects and lists may nest (512 levels). A free-form value nests at
most ``MAX_NESTING_DEPTH`` levels inside a body's own few, so a valid body is far shallower; the
bound leaves the engine to name the field of a near miss and keeps the parser away from Python's
recursion limit, so no depth is answered with anything but a 422."""
_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # the UTF-32 ones start with these
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # only escapes make surrogates: UTF-8 has none
_UNIX_TIME = re.compile(r"[+-]?[0-9.]+")  # what pydantic would read as Unix time in a datetime string
T = TypeVar("T")


class _RepeatedKey(dict[str, Any]):
    """A parsed JSON object in which ``key`` appeared more than once (the last value kept)."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) == len(pairs):
        return value
    seen: set[str] = set()
    repeated = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
    return _RepeatedKey(pairs, repeated)


def _path(steps: tuple[str | int, ...]) -> str:
    return ".".join(str(step) for step in steps) or "body"


def _too_deep() -> InvalidJson:
    return InvalidJson(
        "body",
        f"the request body nests objects and lists deeper than the bound of {MAX_BODY_DEPTH} levels; "
        "no request needs that many",
        {"max_depth": MAX_BODY_DEPTH},
    )


def read_json_body(raw: bytes) -> Any:
    """The JSON value of a request body, or ``InvalidJson`` naming what is wrong: bytes that are
    not UTF-8 (a byte order mark, UTF-16 or UTF-32 included), malformed JSON (with its position), a
    key repeated in one object (naming it), a lone surrogate escape, or nesting deeper than
    ``MAX_BODY_DEPTH``. NaN and Infinity parse: the models refuse them, naming the field."""
    if raw.startswith(_BOMS) or b"\x00" in raw[:4]:
        raise InvalidJson(
            "body",
            "the request body is not UTF-8: it starts with a byte order mark or is UTF-16 or UTF-32; "
            "send JSON encoded as UTF-8 without a byte order mark (RFC 8259)",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJson(
            "body", f"the request body is not valid UTF-8 (byte {exc.start}); send JSON encoded as UTF-8 (RFC 8259)"
        ) from None
    try:
        value = json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise InvalidJson(
            "body",
            f"the request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
            f"(character {exc.pos})",
        ) from None
    except RecursionError:
        raise _too_deep() from None
    _check_parsed(value, strings=_SURROGATE_ESCAPE.search(text) is not None)
    return value


def _check_parsed(value: Any, *, strings: bool) -> None:
    """Walk a parsed body (an explicit stack, in document order) for what the parser lets by: nesting
    deeper than ``MAX_BODY_DEPTH``, a repeated key and, with ``strings``, a lone surrogate."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 0, ())]
    while stack:
        item, depth, steps = stack.pop()
        if isinstance(item, str):
            if strings and _SURROGATE.search(item):
                raise InvalidJson(
                    _path(steps),
                    "holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair), which is no "
                    "character; send text as valid Unicode",
                )
            continue
        if isinstance(item, dict):
            if depth >= MAX_BODY_DEPTH:
                raise _too_deep()
            if isinstance(item, _RepeatedKey):
                raise InvalidJson(
                    _path((*steps, item.key)),
                    f"the key {item.key!r} appears more than once in one JSON object; send each key once "
                    "(parsers disagree on which value wins)",
                )
            children: list[tuple[Any, int, tuple[str | int, ...]]] = []
            for key, child in item.items():
                children += [(key, depth + 1, (*steps, key)), (child, depth + 1, (*steps, key))]
            stack.extend(reversed(children))
        elif isinstance(item, list):
            if depth >= MAX_BODY_DEPTH:
                raise _too_deep()
            stack.extend((child, depth + 1, (*steps, i)) for i, child in reversed(list(enumerate(item))))


def _masked_unix_times(value: Any) -> tuple[Any, dict[str, str]]:
    """A copy of a parsed body with every string pydantic could read as Unix time replaced by a
    marker that is no time, and the markers' original strings."""
    found: dict[str, str] = {}
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, dict):
            container[key] = copy = dict(item)
            stack.extend((copy, k) for k in copy)
        elif isinstance(item, list):
            container[key] = copy = list(item)
            stack.extend((copy, i) for i in range(len(copy)))
        elif isinstance(item, str) and _UNIX_TIME.fullmatch(item):
            container[key] = marker = f"\x00unix-time-{len(found)}"
            found[marker] = item
    return root[0], found


def _refuse_unix_time_strings(model: type[Any], value: Any) -> None:
    """Refuse a datetime sent as a string of Unix time ("1700000000"), which strict JSON mode still
    reads: validate again with such strings masked, and report the datetime fields that fail."""
    masked, found = _masked_unix_times(value)
    if not found:
        return
    try:
        model.model_validate_json(json.dumps(masked), strict=True)
    except ValidationError as exc:
        problems = [
            {
                "type": PydanticCustomError(
                    "datetime_format",
                    f"must be an ISO 8601 date and time with a timezone, as a string (e.g. 2026-12-07T09:00:00Z), "
                    f"not Unix time {found[e['input']]!r}",
                ),
                "loc": e["loc"],
                "input": found[e["input"]],
            }
            for e in exc.errors()
            if e["type"].startswith("date") and isinstance(e.get("input"), str) and e["input"] in found
        ]
        if problems:
            raise ValidationError.from_exception_data(model.__name__, problems) from None  # type: ignore[arg-type]


def _strictly(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """The model's own (lax) validation first, so its checks name the field of a value too deep or
    not finite; then the same JSON value strictly, in JSON mode, the way it came over the wire."""
    model = type(handler(value))
    try:
        strict = model.model_validate_json(json.dumps(value), strict=True)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):  # the strict reader's own nesting limit
            raise PydanticCustomError(
                "too_deep", "nests objects and lists deeper than strict validation reads; flatten it"
            ) from None
        raise
    _refuse_unix_time_strings(model, value)
    return strict


StrictJson = Annotated[T, WrapValidator(_strictly)]
"""A request body parameter validated strictly (``_strictly``): ``body: StrictJson[Model]``."""

# what a strict type error wants, by pydantic error type
_WANTED = {
    "float_type": "a number",
    "int_type": "an integer",
    "bool_type": "true or false",
    "string_type": "a string",
    "datetime_type": "an ISO 8601 date and time with a timezone, as a string (e.g. 2026-12-07T09:00:00Z)",
    "uuid_type": "a UUID, as a string",
}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {json.dumps(value[:40])}"
    return "an array" if isinstance(value, list) else "an object"


def _said(problem: dict[str, Any]) -> str:
    """A problem's message; a wrong JSON type says what was wanted and what came (types are never
    converted: send 0.5, not "0.5")."""
    wanted = _WANTED.get(problem.get("type", ""))
    if wanted is None or "input" not in problem:
        return str(problem.get("msg", "invalid value"))
    return f"must be {wanted}, got {_json_kind(problem['input'])} (JSON types are not converted)"


class StrictJsonRoute(APIRoute):
    """A /v1 route that reads its JSON body strictly: ``read_json_body`` checks the bytes before
    FastAPI parses them, and the body parameter must be declared ``StrictJson[...]``."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        if self.body_field is not None and not any(
            isinstance(m, WrapValidator) and m.func is _strictly for m in self.body_field.field_info.metadata
        ):
            raise TypeError(f"{path}: declare the request body StrictJson[...]")

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def read_strictly(request: Request) -> Response:
            raw = await request.body()  # read once: the handler gets the same bytes
            if raw:
                read_json_body(raw)
            return await handler(request)

        return read_strictly


API_DESCRIPTION = """Ranking changes only through a profile that an offline evaluation and a full-retrieval holdout
both found to improve it; every retrieval saves a replayable receipt that feedback binds to.

**Keys.** Every `/v1` route but `/v1/health` needs `Authorization: Bearer <key>` (*Authorize*
above). A key names its owner, and every request acts for that owner: no body names one.
`prme keys create` makes the first key; an operator key makes more (`POST /v1/keys`).

**Roles.** An *agent* key stores, reads and retrieves memories and records feedback. An
*operator* key may do that too, and also manages keys, holdout queries, learning evaluations and
ranking profiles; those operations answer an agent key with 403 `role_forbidden`.

**Scopes.** A key may be limited to some scopes. Scopes a request names must be within them
(403 `scope_forbidden`); a record read by id whose scopes are outside them reads as not found
(404), like a missing id or another owner's; pages list only the records within them. Leaving
`scopes` out means every configured scope the key may read. Ids such a key chooses for new records
live in a namespace of its own, so an id in use outside its scopes is like one never used (see
*Retries*).

**Retries.** Writes that take a caller-chosen id may be retried: the same `feedback_id`,
`citation_id`, `profile_id` or `change_id` with the same content returns the first record; with
other content it is 409 `idempotency_conflict`. A memory `id` that exists already is always 409.
Ids are unique per owner, so a key limited to some scopes chooses them in a namespace of its owner
and scope set: the record is stored under `uuid5(NAMESPACE_URL, J)`, J the compact UTF-8 JSON array
of `"prme:scoped-id:v1"`, the owner, the key's scopes sorted, the kind (`memory`, `feedback`,
`citation`, `profile` or `pointer-change`) and the chosen id, e.g.
`["prme:scoped-id:v1","alice",["project"],"feedback","0b6e3d2a-7c41-4f58-a9d3-5e2f1c7b8a90"]`; the
response carries that id. Keys with the same scope limit share the namespace, so a retry from any of
them finds the first record; an id used outside the key's scopes is like one never used. Reads take
ids as stored: read such a record by the id the response gave, not by the chosen one. A key without
a scope limit stores the chosen id itself.

**Errors.** Every error body is `{"error": {"type", "message", ...}}` (schema `ErrorBody`):
401 key, 403 role, scope or owner, 404 id, 409 conflict or stale state, 413 body over the
limit, 422 input (naming the field and the bound), 500 integrity failure, 503 store unavailable
(unreachable, or its file held by another process).

**Bodies.** A request body is one JSON text in UTF-8 (RFC 8259) and its values have the JSON types
the schema names: `0.5`, not `"0.5"`; `true`, not `1` or `"true"`; times as ISO 8601 strings with a
timezone (`"2026-12-07T09:00:00Z"`), never Unix time. Another encoding, malformed JSON, a key
repeated in one object or nesting past 512 levels is 422 `invalid_json` (naming the position or the
key); a value of another type is 422 `invalid_input` naming the field."""

TAGS = [
    {"name": "service", "description": "Liveness and the key in use."},
    {"name": "memories", "description": "Store, list, read, supersede, archive and delete memories; forget an owner."},
    {"name": "retrieval", "description": "Retrieve with a receipt; read receipts back."},
    {"name": "feedback", "description": "Relevance labels, agent judgments, answer citations, context ablation."},
    {"name": "learning", "description": "Holdout queries and the two evaluations a profile needs (operator keys)."},
    {
        "name": "profiles",
        "description": "Ranking profiles and the per-scope-set pointer that serves one (operator keys).",
    },
    {"name": "keys", "description": "API keys of the operator key's own owner (operator keys)."},
]

_ROLE_FORBIDDEN = "`role_forbidden`: an agent key; this operation needs an operator key."
_SCOPE_FORBIDDEN = "`scope_forbidden`: a scope the request names is outside the key's scopes."
_OWNER_MISMATCH = "`owner_mismatch`: a submitted report belongs to another owner than the key's."
_CHOSEN_ID = (
    "From a key limited to some scopes, a chosen id is stored under an id derived from it for the key's scope set "
    "(the API description, *Retries*), which the response carries; an id used outside those scopes is like one "
    "never used."
)

# (description, example body) of each error status, unless a route says more.
_ERRORS: dict[int, tuple[str, dict[str, Any]]] = {
    401: (
        "`unauthenticated`: the API key is missing, malformed, unknown, revoked or expired (`reason` says "
        "which). Nothing was read or written.",
        {
            "type": "unauthenticated",
            "message": "no API key was presented; send Authorization: Bearer <key>",
            "reason": "missing",
        },
    ),
    403: (
        "Forbidden; nothing was read or written.",
        {
            "type": "role_forbidden",
            "message": "create api key needs an operator key; this API key's role is 'agent' (an operator creates "
            "one: prme keys create --role operator, or POST /v1/keys)",
            "role": "agent",
            "needed_role": "operator",
        },
    ),
    404: (
        "`not_found`: no such record for this API key: missing, another owner's, or outside the key's scopes "
        "(`resource` names the kind, never whose it is).",
        {"type": "not_found", "resource": "memory", "message": "memory not found for this API key"},
    ),
    409: (
        "A conflict with what is stored (`type` says which); the first record stands.",
        {
            "type": "idempotency_conflict",
            "message": "feedback_id 0b6e3d2a-7c41-4f58-a9d3-5e2f1c7b8a90 already identifies a different relevance "
            "judgment; the first record stands: use a new feedback_id for a new judgment",
        },
    ),
    413: (
        "`body_too_large`: the request body is over the server's limit (`bound.max_bytes`); nothing was read. "
        "Send less per request.",
        {
            "type": "body_too_large",
            "field": "body",
            "message": "body: the request body exceeds 8388608 bytes; send less per request",
            "bound": {"max_bytes": 8388608},
        },
    ),
    422: (
        "`invalid_input` (or a more specific type): the input is invalid. `field` names the first field at "
        "fault and `bound` its limit; a refused request body lists every problem in `problems`. "
        "`invalid_json`: the body is not one JSON text in UTF-8 (another encoding, malformed, a key repeated "
        "in one object, nested too deep). Nothing was written.",
        {
            "type": "invalid_input",
            "field": "limit",
            "message": "limit: Input should be less than or equal to 1000",
            "bound": {"le": 1000},
            "problems": [
                {"field": "limit", "message": "Input should be less than or equal to 1000", "bound": {"le": 1000}}
            ],
        },
    ),
    500: (
        "`integrity_error`: a stored record failed its verification; or `internal_error`: the server failed "
        "(see its log).",
        {"type": "internal_error", "message": "the server failed; see its log"},
    ),
    503: (
        "`store_unavailable`: the store cannot be reached, or another process holds its (DuckDB) file; retry later.",
        {
            "type": "store_unavailable",
            "message": "cannot open DuckDB file '/srv/prme/prme.duckdb'. Another process holds it (process 4242); "
            "close that process or raise lock_timeout (waited 5s)",
        },
    ),
}


_SCOPE_EXAMPLE = {
    "type": "scope_forbidden",
    "field": "scopes",
    "message": "scopes: scope 'personal' is outside this API key's scopes ['project']",
}


def _error_response(status: int, description: str, example: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = {
        "model": ErrorBody,
        "description": description,
        "content": {"application/json": {"example": {"error": example}}},
    }
    if status == 401:
        response["headers"] = {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}}
    return response


def _doc(
    method: str, text: str, *statuses: int, notes: dict[int, str] | None = None, resource: str = "memory"
) -> dict[str, Any]:
    """A route's documentation: ``text``, the key it needs (the role of ``MemoryService.<method>``),
    its error responses (401, 500 and 503 always, 403 for operator routes, and ``statuses``;
    ``notes`` replaces a status's usual description, for 403 the scope reason; ``resource`` is
    the 404 example's) and its request body examples (``models.REQUEST_EXAMPLES[method]``)."""
    notes = notes or {}
    operator_only = role_of(getattr(MemoryService, method)) == "operator"
    key = "an operator key (an agent key gets 403 `role_forbidden`)" if operator_only else "any key, agent or operator"
    forbidden = [_ROLE_FORBIDDEN] if operator_only else []
    if 403 in notes:
        forbidden.append(notes[403])
    elif 403 in statuses:
        forbidden.append(_SCOPE_FORBIDDEN)
    examples = {
        403: _ERRORS[403][1] if operator_only else _SCOPE_EXAMPLE,
        404: {"type": "not_found", "resource": resource, "message": f"{resource} not found for this API key"},
    }
    responses = {}
    for status in sorted({401, 500, 503, *statuses, *([403] if forbidden else [])}):
        description = (
            " ".join([_ERRORS[403][0], *forbidden]) if status == 403 else notes.get(status, _ERRORS[status][0])
        )
        responses[status] = _error_response(status, description, examples.get(status, _ERRORS[status][1]))
    extra = None
    if method in m.REQUEST_EXAMPLES:
        extra = {"requestBody": {"content": {"application/json": {"examples": m.REQUEST_EXAMPLES[method]}}}}
    return {"description": f"{text}\n\n**Key:** {key}.", "responses": responses, "openapi_extra": extra}


def _keep_example_nulls(app: FastAPI, router: APIRouter) -> None:
    """FastAPI writes the OpenAPI document without null values (``exclude_none``), the examples'
    too, and an example missing a required null fails validation: put each route's request body
    examples back as written."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        for route in router.routes:
            examples = _body_examples(getattr(route, "openapi_extra", None))
            if isinstance(route, APIRoute) and examples is not None:
                for method in route.methods:
                    operation = schema["paths"][route.path_format][method.lower()]
                    operation["requestBody"]["content"]["application/json"]["examples"] = examples
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _body_examples(extra: dict[str, Any] | None) -> dict[str, Any] | None:
    return (extra or {}).get("requestBody", {}).get("content", {}).get("application/json", {}).get("examples")


def _routes(service: MemoryService) -> APIRouter:
    async def principal(credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)]) -> Principal:
        return await service.authenticate(None if credentials is None else credentials.credentials)

    Caller = Annotated[Principal, Depends(principal)]
    r = APIRouter(prefix="/v1", route_class=StrictJsonRoute)
    not_this_key = "outside the key's scopes reads as not found (404), like a missing or another owner's id"

    @r.get(
        "/health",
        tags=["service"],
        summary="Liveness (no key needed)",
        description='Answers `{"status": "ok"}` while the server runs. Needs no key and reads nothing: a '
        "liveness probe (a route that needs the store answers 503 while it is unavailable).",
    )
    async def health() -> Response:
        return _ok({"status": "ok"})

    @r.get(
        "/whoami",
        tags=["service"],
        summary="The key's owner, scope limit and expiry",
        **_doc(
            "whoami",
            "The API key's id, owner, role, scope limit (null: none) and expiry, and the scopes this server is "
            "configured with. A cheap way to check a key.",
        ),
    )
    async def whoami(p: Caller) -> Response:
        return _ok(await service.whoami(p, m.NoArguments()))

    # memories
    @r.post(
        "/memories",
        tags=["memories"],
        response_model=MemoryNode,
        summary="Store one memory",
        **_doc(
            "store_memory",
            "Stores one memory for the key's owner and returns it with its id. `scope` (default `personal`) must "
            "be within the key's scopes. A caller-chosen `id` that exists already is refused and nothing is "
            f"written. {_CHOSEN_ID}",
            403,
            409,
            413,
            422,
            notes={409: "`idempotency_conflict`: a memory with that `id` exists already."},
        ),
    )
    async def store_memory(body: StrictJson[MemoryInput], p: Caller) -> Response:
        return _ok(await service.store_memory(p, body))

    @r.post(
        "/memories/batch",
        tags=["memories"],
        response_model=m.Items[MemoryNode],
        summary="Store memories atomically",
        **_doc(
            "store_batch",
            f"Stores 1 to {MAX_BATCH_NODES} memories in one transaction: all of them or none. Every item's scope "
            "must be within the key's scopes (403 names `items[i].scope`); one caller-chosen `id` that exists "
            f"already refuses the whole batch. {_CHOSEN_ID}",
            403,
            409,
            413,
            422,
            notes={409: "`idempotency_conflict`: a memory with one of the items' `id`s exists already."},
        ),
    )
    async def store_batch(body: StrictJson[m.StoreBatchRequest], p: Caller) -> Response:
        return _ok(await service.store_batch(p, body))

    @r.get(
        "/memories",
        tags=["memories"],
        summary="A page of memories (by scope, type, storage time)",
        **_doc(
            "list_memories",
            "A page of the owner's memories within the key's scopes, filtered by `scopes` (within the key's), "
            "`node_types` and storage time (`created_from`, `created_to`: timezone-aware). Current versions only "
            "unless `include_inactive` (then superseded and archived ones too). Pass `next_cursor` as `cursor` "
            "for the next page (null: last page).",
            403,
            422,
        ),
    )
    async def list_memories(q: Annotated[m.ListMemoriesQuery, Query()], p: Caller) -> Response:
        return _ok(await service.list_memories(p, q))

    @r.post(
        "/memories/{node_id}/update",
        tags=["memories"],
        response_model=MemoryNode,
        summary="Supersede a memory",
        **_doc(
            "update_memory",
            "Supersedes a memory with new content: the new version (a new id) is returned and retrieved from now "
            "on; the old one stays readable by id and in the history, marked superseded. A memory "
            f"{not_this_key}.",
            404,
            413,
            422,
        ),
    )
    async def update_memory(node_id: UUID, body: StrictJson[m.MemoryContent], p: Caller) -> Response:
        return _ok(await service.update_memory(p, m.UpdateMemoryRequest(node_id=node_id, content=body.content)))

    @r.post(
        "/memories/{node_id}/archive",
        tags=["memories"],
        response_model=MemoryNode,
        summary="Archive a memory",
        **_doc(
            "archive_memory",
            "Archives a memory: it stays readable by id and in its history, and is no longer retrieved. Takes no "
            f"body. A memory {not_this_key}.",
            404,
            422,
            notes={422: "`invalid_input`: the memory is archived already, or `node_id` is not a UUID."},
        ),
    )
    async def archive_memory(node_id: UUID, p: Caller) -> Response:
        return _ok(await service.archive_memory(p, m.NodeRef(node_id=node_id)))

    @r.delete(
        "/memories/{node_id}",
        tags=["memories"],
        response_model=DeletionRecord,
        summary="Delete a memory",
        **_doc(
            "delete_memory",
            "Deletes a memory for good: every version and its edges. Receipts that named it keep only its id and "
            "content hash. Returns the deletion record (ids, content hashes, time, and this key as the actor; "
            f"never content). A deleted id reads as never there (404); a memory {not_this_key}.",
            404,
            422,
        ),
    )
    async def delete_memory(node_id: UUID, p: Caller) -> Response:
        return _ok(await service.delete_memory(p, m.NodeRef(node_id=node_id)))

    @r.post(
        "/owner/forget",
        tags=["memories"],
        response_model=DeletionRecord,
        summary="Forget the key's owner",
        **_doc(
            "forget_owner",
            "Forgets the key's owner in one transaction: every memory, receipt, feedback and citation record, "
            "holdout query, learning report, profile and pointer, and every API key, this one too. Cannot be "
            "undone. Needs a key without a scope limit and `confirm_owner` spelling out the key's owner. Returns "
            "the deletion record (row counts, never content).",
            403,
            413,
            422,
            notes={
                403: "`scope_forbidden`: the key is limited to some scopes; forgetting an owner erases them all.",
                422: "`invalid_input`: `confirm_owner` is not the key's owner.",
            },
        ),
    )
    async def forget_owner(body: StrictJson[m.ForgetOwnerRequest], p: Caller) -> Response:
        return _ok(await service.forget_owner(p, body))

    @r.get(
        "/memories/{node_id}",
        tags=["memories"],
        response_model=MemoryNode,
        summary="One memory",
        **_doc(
            "get_memory",
            f"One memory by id, with its lifecycle and version. A memory {not_this_key}.",
            404,
            422,
        ),
    )
    async def get_memory(node_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_memory(p, m.NodeRef(node_id=node_id)))

    # retrieval
    @r.post(
        "/retrieve",
        tags=["retrieval"],
        response_model=m.RetrieveResponse,
        summary="Retrieve with a receipt",
        **_doc(
            "retrieve",
            "Hybrid retrieval (BM25 and embeddings, ranked by base scoring or the scope set's active ranking "
            "profile) that saves a replayable receipt: `metadata.request_id` names it for feedback and for "
            "`GET /v1/retrievals/{request_id}`. `scopes` default to every configured scope the key may read; "
            "named ones must be within the key's. `include_cross_scope` needs a key without a scope limit. "
            "`include_context` (default true) returns the exact rendered context, `include_bundle` the packed "
            "bundle that context ablation takes.",
            403,
            413,
            422,
            notes={403: f"{_SCOPE_FORBIDDEN} Or `include_cross_scope` with a key limited to some scopes."},
        ),
    )
    async def retrieve(body: StrictJson[m.RetrieveRequest], p: Caller) -> Response:
        return _ok(await service.retrieve(p, body))

    @r.get(
        "/retrievals/{request_id}",
        tags=["retrieval"],
        response_model=RetrievalReceipt,
        summary="A retrieval's receipt",
        **_doc(
            "get_receipt",
            "The saved receipt of a retrieval: the request, the candidates with provenance and score traces, the "
            f"ranking policy and profile, the packed context and its checksum. A receipt {not_this_key}.",
            404,
            422,
            resource="retrieval receipt",
        ),
    )
    async def get_receipt(request_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_receipt(p, m.RequestRef(request_id=request_id)))

    # feedback
    @r.post(
        "/relevance",
        tags=["feedback"],
        response_model=RelevanceRecord,
        summary="Record relevance labels",
        **_doc(
            "record_relevance",
            "Records relevance labels (`labels`: node id → true or false) for members of one saved retrieval, "
            "bound to its receipt. The retrieval must be the owner's and within the key's scopes (else 404). "
            "Idempotent by `feedback_id`: a retry with the same labels returns the first record (without one, "
            f"each call records anew). {_CHOSEN_ID}",
            404,
            409,
            413,
            422,
            notes={409: "`idempotency_conflict`: `feedback_id` already holds a different record."},
            resource="retrieval receipt",
        ),
    )
    async def record_relevance(body: StrictJson[m.RecordRelevanceRequest], p: Caller) -> Response:
        return _ok(await service.record_relevance(p, body))

    @r.get(
        "/relevance",
        tags=["feedback"],
        response_model=m.Items[RelevanceRecord],
        summary="A page of records",
        **_doc(
            "list_relevance",
            "A page of the owner's relevance records within the key's scopes, by feedback id. Pass `next_after` "
            "as `after` for the next page (null: last page).",
            422,
        ),
    )
    async def list_relevance(q: Annotated[m.Page, Query()], p: Caller) -> Response:
        return _ok(await service.list_relevance(p, q))

    @r.get(
        "/relevance/{feedback_id}",
        tags=["feedback"],
        response_model=RelevanceRecord,
        summary="One record",
        **_doc(
            "get_relevance",
            f"One relevance record by feedback id. A record {not_this_key}.",
            404,
            422,
            resource="relevance record",
        ),
    )
    async def get_relevance(feedback_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_relevance(p, m.FeedbackRef(feedback_id=feedback_id)))

    @r.post(
        "/answer-citations",
        tags=["feedback"],
        response_model=AnswerCitationRecord,
        summary="Record answer citations",
        **_doc(
            "record_answer_citations",
            "Records which memories of a retrieval's context an answer cited (`cited_node_ids`, possibly none), "
            "bound to the receipt and its rendered context. The retrieval must be the owner's and within the "
            "key's scopes (else 404). Idempotent by `citation_id`: a retry with the same content returns the "
            f"first record. {_CHOSEN_ID}",
            404,
            409,
            413,
            422,
            notes={409: "`idempotency_conflict`: `citation_id` already holds a different record."},
            resource="retrieval receipt",
        ),
    )
    async def record_citations(body: StrictJson[m.RecordCitationsRequest], p: Caller) -> Response:
        return _ok(await service.record_answer_citations(p, body))

    @r.get(
        "/answer-citations",
        tags=["feedback"],
        response_model=m.Items[AnswerCitationRecord],
        summary="A page",
        **_doc(
            "list_answer_citations",
            "A page of the owner's answer citation records whose retrievals are within the key's scopes. Pass "
            "`next_after` as `after` for the next page (null: last page).",
            422,
        ),
    )
    async def list_citations(q: Annotated[m.Page, Query()], p: Caller) -> Response:
        return _ok(await service.list_answer_citations(p, q))

    @r.get(
        "/answer-citations/{citation_id}",
        tags=["feedback"],
        response_model=AnswerCitationRecord,
        summary="One record",
        **_doc(
            "get_answer_citations",
            f"One answer citation record by citation id. A record whose retrieval is {not_this_key}.",
            404,
            422,
            resource="answer citation record",
        ),
    )
    async def get_citations(citation_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_answer_citations(p, m.CitationRef(citation_id=citation_id)))

    @r.post(
        "/context/ablation",
        tags=["feedback"],
        response_model=ContextAblation,
        summary="Ablate context entries",
        **_doc(
            "ablate_context",
            "Removes included entries from a packed context bundle (a retrieval's, with `include_bundle: true`) "
            "without retrieving again, with exact token accounting; returns the counterfactual bundle and both "
            "contexts' digests. Computes only: reads and writes nothing.",
            413,
            422,
            notes={422: f"{_ERRORS[422][0]} Also a node id that is not an included entry of the bundle."},
        ),
    )
    async def ablate(body: StrictJson[m.AblateContextRequest], p: Caller) -> Response:
        return _ok(await service.ablate_context(p, body))

    @r.post(
        "/context/presence",
        tags=["feedback"],
        response_model=ContextPresenceCredit,
        summary="Context presence credit",
        **_doc(
            "assess_context_presence",
            "The presence-credit tier of one cited, ablated entry, from whether the answer was correct with the "
            "full context (`baseline_correct`) and without the entry (`counterfactual_correct`) under your "
            "`protocol`. The citation record must be the owner's and its retrieval within the key's scopes (else "
            "404). Computes only; nothing is stored.",
            404,
            413,
            422,
            resource="answer citation record",
        ),
    )
    async def presence(body: StrictJson[m.AssessPresenceRequest], p: Caller) -> Response:
        return _ok(await service.assess_context_presence(p, body))

    # learning and holdout
    @r.post(
        "/learning/evaluate",
        tags=["learning"],
        response_model=LearningEvaluation,
        summary="Offline proposal (gate 1)",
        **_doc(
            "evaluate_learning",
            "The offline proposal for an exact scope set: snapshots the owner's relevance records, fits ranking "
            "multipliers on a training split and evaluates them on validation. `decision` says whether they "
            "improved ranking. Records the report as evidence and changes nothing else: no weight, pointer or "
            "profile. A key limited to some scopes evaluates only that scope set's feedback. Pass the report "
            "unchanged to `POST /v1/learning/holdout`.",
            403,
            409,
            413,
            422,
            notes={
                409: "`missing_evidence`: a receipt the snapshot needs was deleted meanwhile; evaluate again.",
                422: f"{_ERRORS[422][0]} Also `snapshot_too_large` (more records than `max_records`).",
            },
        ),
    )
    async def evaluate_learning(body: StrictJson[m.EvaluateLearningRequest], p: Caller) -> Response:
        return _ok(await service.evaluate_learning(p, body))

    @r.post(
        "/holdout/queries",
        tags=["learning"],
        response_model=m.Items[HoldoutQuery],
        summary="Register queries",
        **_doc(
            "register_holdout_queries",
            f"Registers 1 to {MAX_QUERIES_PER_CALL} holdout queries for an exact scope set, each with its "
            "complete set of relevant memory ids (existing memories of the owner in that scope set). Append-only "
            "and idempotent: a query registered again with the same judgment returns the first registration.",
            403,
            409,
            413,
            422,
            notes={
                409: "`idempotency_conflict`: the query is registered at that `reference_time` with another "
                "judgment; retire it and register it with another `reference_time`.",
                422: f"{_ERRORS[422][0]} Also a relevant node id that is not a memory of the owner in that scope set.",
            },
        ),
    )
    async def register_holdout(body: StrictJson[m.RegisterHoldoutRequest], p: Caller) -> Response:
        return _ok(await service.register_holdout_queries(p, body))

    @r.get(
        "/holdout/queries",
        tags=["learning"],
        response_model=m.Items[HoldoutQuery],
        summary="Active queries",
        **_doc("list_holdout_queries", "The active (not retired) holdout queries of an exact scope set.", 403, 422),
    )
    async def list_holdout(q: Annotated[m.ScopesQuery, Query()], p: Caller) -> Response:
        return _ok(await service.list_holdout_queries(p, q))

    @r.post(
        "/holdout/queries/retire",
        tags=["learning"],
        response_model=m.Retired,
        summary="Retire queries",
        **_doc(
            "retire_holdout_queries",
            "Retires holdout queries of an exact scope set (an append-only record); returns how many were newly "
            "retired, so a retry retires 0.",
            403,
            404,
            413,
            422,
            resource="holdout query",
        ),
    )
    async def retire_holdout(body: StrictJson[m.RetireHoldoutRequest], p: Caller) -> Response:
        return _ok(await service.retire_holdout_queries(p, body))

    @r.post(
        "/learning/holdout",
        tags=["learning"],
        response_model=FullRetrievalEvaluation,
        summary="Run and evaluate the full-retrieval holdout (gate 2)",
        **_doc(
            "evaluate_holdout",
            "Runs every active holdout query of the proposal's scope set twice over frozen memory, as the "
            "baseline (what serves now) and as the candidate (the proposal's multipliers), and evaluates the "
            "pairs; the look at the holdout is recorded. `proposal` is the report `POST /v1/learning/evaluate` "
            "returned, unchanged, of the key's owner. Pass the result to `POST /v1/profiles`.",
            403,
            404,
            409,
            413,
            422,
            notes={
                403: f"{_OWNER_MISMATCH} {_SCOPE_FORBIDDEN}",
                404: "`not_found`: the scope set has no active holdout queries; register them first.",
                409: "`holdout_overlaps_training`: a holdout query is one the proposal trained or validated on; "
                "`memory_changed`: the owner's memory changed during the run.",
                422: f"{_ERRORS[422][0]} Also `holdout_invalid` and a changed report (it re-derives itself).",
            },
            resource="holdout query",
        ),
    )
    async def evaluate_holdout(body: StrictJson[m.EvaluateHoldoutRequest], p: Caller) -> Response:
        return _ok(await service.evaluate_holdout(p, body))

    # ranking profiles (fixed paths before /profiles/{profile_id})
    @r.post(
        "/profiles",
        tags=["profiles"],
        response_model=RankingProfile,
        summary="Create a profile",
        **_doc(
            "create_ranking_profile",
            "Persists an immutable ranking profile from a positive offline proposal and the positive holdout "
            "evaluated from it, both as this store returned them; does not activate it. Idempotent by "
            f"`profile_id`: the same evidence returns the first profile. {_CHOSEN_ID}",
            403,
            404,
            409,
            413,
            422,
            notes={
                403: f"{_OWNER_MISMATCH} {_SCOPE_FORBIDDEN}",
                404: "`not_found`: no `baseline_profile_id` profile of this owner.",
                409: "`idempotency_conflict`: `profile_id` names a profile with other evidence.",
                422: f"{_ERRORS[422][0]} Also `invalid_evidence` (a report this store did not produce, or an "
                "unrecorded holdout look) and a decision that is not an improvement.",
            },
            resource="ranking profile",
        ),
    )
    async def create_profile(body: StrictJson[m.CreateProfileRequest], p: Caller) -> Response:
        return _ok(await service.create_ranking_profile(p, body))

    @r.get(
        "/profiles",
        tags=["profiles"],
        response_model=m.Items[RankingProfile],
        summary="A page of profiles",
        **_doc(
            "list_ranking_profiles",
            "A page of the owner's ranking profiles within the key's scopes, by profile id. Pass `next_after` as "
            "`after` for the next page (null: last page).",
            422,
        ),
    )
    async def list_profiles(q: Annotated[m.Page, Query()], p: Caller) -> Response:
        return _ok(await service.list_ranking_profiles(p, q))

    @r.get(
        "/profiles/active",
        tags=["profiles"],
        summary="The profile serving a scope set ({'profile': null}: none)",
        **_doc(
            "get_active_ranking_profile",
            'The ranking profile serving an exact scope set now; `{"profile": null}`: base scoring.',
            403,
            422,
        ),
    )
    async def active_profile(q: Annotated[m.ScopesQuery, Query()], p: Caller) -> Response:
        return _ok(await service.get_active_ranking_profile(p, q))

    @r.get(
        "/profiles/history",
        tags=["profiles"],
        response_model=m.History[RankingProfileState],
        summary="Pointer changes, newest first",
        **_doc(
            "ranking_profile_history",
            "The pointer changes (activations, deactivations, rollbacks) of an exact scope set, newest first. "
            "Pass `next_before` as `before` for older ones (null: last page).",
            403,
            422,
        ),
    )
    async def profile_history(q: Annotated[m.HistoryQuery, Query()], p: Caller) -> Response:
        return _ok(await service.ranking_profile_history(p, q))

    @r.get(
        "/profiles/as-of",
        tags=["profiles"],
        summary="The pointer change in force at `at` ({'state': null}: none)",
        **_doc(
            "ranking_profile_at",
            'The pointer change of an exact scope set in force at `at` (timezone-aware); `{"state": null}`: '
            "none had happened, base scoring.",
            403,
            422,
        ),
    )
    async def profile_as_of(q: Annotated[m.AsOfQuery, Query()], p: Caller) -> Response:
        return _ok(await service.ranking_profile_at(p, q))

    pointer_conflicts = (
        "`stale_state`: `expected_profile_id` is not what serves now; `no_op_transition`: the change would change "
        "nothing. Both carry the scope set's `current_state`. `idempotency_conflict`: `change_id` names another "
        "change."
    )

    @r.post(
        "/profiles/deactivate",
        tags=["profiles"],
        response_model=RankingProfileState,
        summary="Base scoring",
        **_doc(
            "deactivate_ranking_profile",
            "Returns an exact scope set to base scoring (a recorded pointer change). With `expected_profile_id` "
            "(null: base scoring) only if that is what serves now; leave it out to change whatever serves. "
            f"Idempotent by `change_id`: a retry returns the first record marked `replayed`. {_CHOSEN_ID}",
            403,
            409,
            413,
            422,
            notes={409: pointer_conflicts},
        ),
    )
    async def deactivate(body: StrictJson[m.DeactivateRequest], p: Caller) -> Response:
        return _ok(await service.deactivate_ranking_profile(p, body))

    @r.post(
        "/profiles/rollback",
        tags=["profiles"],
        response_model=RankingProfileState,
        summary="Serve an earlier one",
        **_doc(
            "rollback_ranking_profile",
            "Serves an earlier profile of the scope set again (`profile_id`), or base scoring (`profile_id: "
            "null`), as a recorded pointer change. `expected_profile_id` and `change_id` as for deactivation.",
            403,
            404,
            409,
            413,
            422,
            notes={404: "`not_found`: no such profile for this API key.", 409: pointer_conflicts},
            resource="ranking profile",
        ),
    )
    async def rollback(body: StrictJson[m.RollbackRequest], p: Caller) -> Response:
        return _ok(await service.rollback_ranking_profile(p, body))

    @r.get(
        "/profiles/{profile_id}",
        tags=["profiles"],
        response_model=RankingProfileStatus,
        summary="One profile",
        **_doc(
            "get_ranking_profile",
            f"One ranking profile with its evidence, and whether it is active. A profile {not_this_key}.",
            404,
            422,
            resource="ranking profile",
        ),
    )
    async def get_profile(profile_id: UUID, p: Caller) -> Response:
        return _ok(await service.get_ranking_profile(p, m.ProfileRef(profile_id=profile_id)))

    @r.post(
        "/profiles/{profile_id}/activate",
        tags=["profiles"],
        response_model=RankingProfileState,
        summary="Activate",
        **_doc(
            "activate_ranking_profile",
            "Activates a profile for its scope set over the exact baseline its holdout used, after rechecking its "
            "feature identity and base scoring against the running pipeline. Idempotent by `change_id`: a retry "
            "returns the first record marked `replayed` (see `superseded_by`). `reactivate: false` refuses a "
            f"profile deactivated or rolled back away since it served. A profile {not_this_key}. {_CHOSEN_ID}",
            404,
            409,
            413,
            422,
            notes={
                409: "`stale_state`: another profile serves now than the holdout's baseline (`current_state`); "
                "`reactivation_refused`; `profile_inapplicable`: the running pipeline's features or base scoring "
                "differ from the profile's; `idempotency_conflict`: `change_id` names another change."
            },
            resource="ranking profile",
        ),
    )
    async def activate(profile_id: UUID, body: StrictJson[m.ActivateBody], p: Caller) -> Response:
        request = m.ActivateRequest(profile_id=profile_id, change_id=body.change_id, reactivate=body.reactivate)
        return _ok(await service.activate_ranking_profile(p, request))

    @r.post(
        "/judgments",
        tags=["feedback"],
        summary="An agent's judgment of a retrieval it answered from (used: relevant; shown, unused: not)",
        **_doc(
            "agent_judge",
            "An agent's judgment of a retrieval it answered from: the results in `used` are recorded relevant, "
            "the other results it returned not relevant, as relevance feedback learning can use. One judgment "
            "per retrieval: a retry returns the first. The retrieval must be the owner's and within the key's "
            "scopes (else 404). Returns the feedback id, the counts, and whether (and why) learning can use it.",
            404,
            409,
            413,
            422,
            notes={
                409: "`idempotency_conflict`: the retrieval was judged already, differently.",
                422: f"{_ERRORS[422][0]} Also a used node id that the retrieval did not return.",
            },
            resource="retrieval receipt",
        ),
    )
    async def judge(body: StrictJson[JudgeArgs], p: Caller) -> Response:
        return _ok(await service.agent_judge(p, body))

    # keys (operator keys only; the keys of the operator key's own owner)
    @r.post(
        "/keys",
        tags=["keys"],
        summary="Make an API key for this owner (the secret is shown once)",
        **_doc(
            "create_api_key",
            "Makes an API key for the operator key's own owner: `role` agent (default) or operator, `scopes` "
            "within the operator key's (default the operator key's), `expires_at` optional. The secret "
            "(`api_key`) is in this response only; the store keeps a salted HMAC of it.",
            403,
            413,
            422,
        ),
    )
    async def create_key(body: StrictJson[m.CreateKeyRequest], p: Caller) -> Response:
        return _ok(await service.create_api_key(p, body))

    @r.get(
        "/keys",
        tags=["keys"],
        summary="This owner's API keys (never their secrets)",
        **_doc(
            "list_api_keys",
            "This owner's API keys within the operator key's scopes: key id, role, scopes, expiry and "
            "revocation; never their secrets.",
        ),
    )
    async def list_keys(p: Caller) -> Response:
        return _ok(await service.list_api_keys(p, m.NoArguments()))

    @r.delete(
        "/keys/{key_id}",
        tags=["keys"],
        summary="Revoke one of this owner's API keys",
        **_doc(
            "revoke_api_key",
            "Revokes one of this owner's API keys (an appended revocation record); it stops authenticating at "
            "once. Another owner's key id, or a key outside the operator key's scopes, reads as not found (404).",
            404,
            422,
            resource="API key",
        ),
    )
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

    app = FastAPIOffline(
        title="PRME Learning",
        version=version or "0.1.0",
        summary="Memory for LLM applications: retrieval with receipts, feedback and evaluated ranking profiles.",
        description=API_DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    _install_error_handlers(app)
    router = _routes(service)
    app.include_router(router)
    _keep_example_nulls(app, router)
    if manager is not None:
        app.mount("/mcp", StreamableHTTPASGIApp(manager))
    return app
