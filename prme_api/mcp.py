"""The MCP server: one tool per operation of ``prme_api.service.OPERATIONS``.

Each tool's input schema is its operation's request model's JSON schema (the model the HTTP
route validates with), and each call runs the same ``MemoryService`` method. The owner is the
configured credential's: ``PRME_API_KEY`` for stdio (``prme mcp``), the request's
``Authorization: Bearer`` key for streamable HTTP (mounted at ``/mcp`` by ``prme serve``). The
key is checked again on every call, so revoking it ends the session's access at once. Errors
come back as tool errors whose structured content is the HTTP error body plus its status.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from mcp import types
from mcp.server.lowlevel import Server

from prme_api.agent_tools import AGENT_TOOLS
from prme_api.errors import error_response
from prme_api.service import OPERATIONS, MemoryService
from prme_core.errors import InvalidInput, RoleForbidden

SERVER_NAME = "prme"
API_KEY_ENV = "PRME_API_KEY"

Credential = Callable[[Any], "str | None"]
"""The API key a tool call presents, read from the call's request context."""


def _result(data: Any, *, error: bool = False) -> types.CallToolResult:
    text = orjson.dumps(data).decode()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=data, is_error=error
    )


def _error(exc: BaseException) -> types.CallToolResult:
    status, body = error_response(exc)
    body["error"]["status"] = status
    return _result(body, error=True)


def tool_definitions() -> list[types.Tool]:
    """Every tool: the agent tool set (small schemas, annotations, output schemas), then the
    operator set (one tool per operation; its input schema is the HTTP request model's)."""
    return [t.definition() for t in AGENT_TOOLS] + [
        types.Tool(name=op.name, description=op.description, input_schema=op.model.model_json_schema())
        for op in OPERATIONS
    ]


AGENT_NAMES = frozenset(t.name for t in AGENT_TOOLS)
if AGENT_NAMES & {op.name for op in OPERATIONS}:  # pragma: no cover - a naming mistake, caught on import
    raise RuntimeError("an agent tool and an operation share a name")


def visible_tools(role: str) -> frozenset[str]:
    """The tools a key of ``role`` lists and may call: an agent key the agent set, an operator
    key both sets."""
    if role == "operator":
        return AGENT_NAMES | {op.name for op in OPERATIONS}
    return AGENT_NAMES


def build_server(service: MemoryService, credential: Credential, *, version: str = "") -> Server[Any]:
    """An MCP server whose tools call ``service`` for the principal ``credential`` names."""
    tools = tool_definitions()
    agent_tools = {t.name: t for t in AGENT_TOOLS}
    operations = {op.name: op for op in OPERATIONS}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        """The tools the caller's key may call (an agent key never sees an operator's)."""
        principal = await service.authenticate(credential(ctx))
        allowed = visible_tools(principal.role)
        return types.ListToolsResult(tools=[t for t in tools if t.name in allowed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            principal = await service.authenticate(credential(ctx))
            if params.name not in visible_tools(principal.role) and params.name in operations:
                raise RoleForbidden(
                    f"the tool {params.name} is in the operator set; this API key's role is {principal.role!r} "
                    "(tools/list shows the tools it may call)",
                    role=principal.role,
                    needed="operator",
                )
            tool = agent_tools.get(params.name)
            target = tool if tool is not None else operations.get(params.name)
            if target is None:
                raise InvalidInput("name", f"unknown tool {params.name!r}; tools/list names every tool")
            request = target.model.model_validate(params.arguments or {})
            return _result(await getattr(service, target.method)(principal, request))
        except Exception as exc:  # every error, validation included, becomes a typed tool error
            return _error(exc)

    return Server(
        SERVER_NAME,
        version=version,
        instructions=(
            "PRME memory for this user: memory_search before answering from what the user said earlier, "
            "memory_judge after answering (the node_ids you used), memory_store for what is worth keeping."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def bearer_credential(ctx: Any) -> str | None:
    """The key of a streamable-HTTP call: its ``Authorization: Bearer`` header."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    value = None if headers is None else headers.get("authorization")
    if not value:
        return None
    scheme, _, key = value.partition(" ")
    return key.strip() if scheme.lower() == "bearer" else value


async def serve_stdio(service: MemoryService, api_key: str, *, version: str = "") -> None:
    """Serve MCP over stdin/stdout for the principal of ``api_key`` until the client closes.

    A line that is not a JSON-RPC message is answered, as JSON-RPC 2.0 asks, with id null: -32700
    (parse error) when it is not JSON, -32600 (invalid request) when it is JSON but no message.
    The SDK's transport hands such a line on as an exception, which its server drops unanswered,
    so those exceptions are answered here and the next lines are served as usual.
    """
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    await service.authenticate(api_key)  # refuse to start with a bad key
    server = build_server(service, lambda ctx: api_key, version=version)

    def refusal(exc: Exception) -> SessionMessage:
        not_json = isinstance(exc, ValidationError) and any(e["type"] == "json_invalid" for e in exc.errors())
        code, message = (
            (types.PARSE_ERROR, "Parse error: the line is not JSON; send one JSON-RPC 2.0 message per line")
            if not_json
            else (types.INVALID_REQUEST, "Invalid request: the line is JSON but not a JSON-RPC 2.0 message")
        )
        return SessionMessage(
            types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))
        )

    async with stdio_server() as (read, write):
        to_server, messages = anyio.create_memory_object_stream[SessionMessage](0)

        async def answer_unparseable() -> None:
            async with to_server, read:
                async for item in read:
                    if isinstance(item, Exception):
                        await write.send(refusal(item))
                    else:
                        await to_server.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer_unparseable)
            await server.run(messages, write, server.create_initialization_options())
            tasks.cancel_scope.cancel()
