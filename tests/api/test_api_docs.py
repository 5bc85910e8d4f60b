"""The API's own documentation (issue 29, item 5), against a real server on both backends: /docs
and /redoc load with no network, every operation says what it does and which key it needs,
documents the errors it can give with the error schema, and offers request examples that the
running API accepts."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin

import pytest

from prme_api.errors import ErrorBody
from prme_api.models import EXAMPLE_NODE_ID, EXAMPLE_OWNER
from tests.api.conftest import SMALL_BODY_LIMIT, ApiServer

READER = "docs-reader"
ERROR_SCHEMA = "#/components/schemas/ErrorBody"
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def spec(api: ApiServer) -> dict[str, Any]:
    with api.http() as http:
        return http.get("/openapi.json").json()


def _operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def _asset_urls(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_reference_only_local_assets_that_the_server_serves(api, page):
    with api.http() as http:
        response = http.get(page)
        assert response.status_code == 200 and "text/html" in response.headers["content-type"]
        html = response.text
        assert not re.search(r"https?://|//cdn", html), "the page must not load anything from the network"
        assets = _asset_urls(html)
        assert any(a.endswith(".js") for a in assets), assets
        for asset in assets:
            assert asset.startswith("/") and not asset.startswith("//"), asset
            served = http.get(urljoin(api.url, asset))
            assert served.status_code == 200 and len(served.content) > 0, asset
        assert "/openapi.json" in html


def test_every_operation_describes_what_it_does_and_the_key_it_needs(spec):
    for path, method, op in _operations(spec):
        description = op.get("description", "").strip()
        assert description, f"{method.upper()} {path} has no description"
        if path != "/v1/health":
            assert "**Key:**" in description, f"{method.upper()} {path} does not say which key it needs"
        operator_only = "**Key:** an operator key" in description
        # an operator-only operation documents the 403 an agent key gets
        assert not operator_only or "role_forbidden" in op["responses"]["403"]["description"], (method, path)


def test_every_operation_documents_its_errors_with_the_error_schema(spec):
    for path, method, op in _operations(spec):
        where = f"{method.upper()} {path}"
        responses = op["responses"]
        takes_input = bool(op.get("parameters")) or "requestBody" in op
        if path != "/v1/health":
            assert "401" in responses, where
        if takes_input:
            assert "422" in responses, where
        if "{" in path:
            assert "404" in responses, where
        if "requestBody" in op:
            assert "413" in responses, where
        errors = {status: r for status, r in responses.items() if not status.startswith("2")}
        for status, response in errors.items():
            assert response["content"]["application/json"]["schema"] == {"$ref": ERROR_SCHEMA}, (where, status)
            ErrorBody.model_validate(response["content"]["application/json"]["example"])
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # FastAPI's 422 shape is not ours


def test_error_bodies_the_api_returns_match_the_documented_schema(api, spec):
    client = api.client
    agent = client.create_api_key(READER, role="agent").api_key
    limited = client.create_api_key(READER, role="operator", scopes=["project"]).api_key
    operator = client.create_api_key(READER, role="operator").api_key
    missing = str(uuid.uuid4())
    cases = [
        (None, "get", "/v1/whoami", None, 401),
        ("prme_not-a-key", "get", "/v1/whoami", None, 401),
        (agent, "get", "/v1/keys", None, 403),
        (limited, "post", "/v1/retrieve", {"query": "cat", "scopes": ["personal"]}, 403),
        (agent, "get", f"/v1/memories/{missing}", None, 404),
        (operator, "post", "/v1/profiles/deactivate", {"scopes": ["agent"]}, 409),  # nothing to deactivate
        (agent, "post", "/v1/memories", {"content": "x" * (SMALL_BODY_LIMIT + 1)}, 413),
        (agent, "get", "/v1/memories", {"limit": 0}, 422),
        (agent, "post", "/v1/retrieve", {"query": "cat", "limit": "many"}, 422),
    ]
    for key, method, path, payload, status in cases:
        with api.http(key) as http:
            if method == "get":
                response = http.get(path, params=payload)
            else:
                response = http.post(path, json=payload)
        assert response.status_code == status, (path, response.text)
        body = ErrorBody.model_validate(response.json())
        template = re.sub(r"/[0-9a-f-]{36}", "/{node_id}", path)
        assert str(status) in spec["paths"][template][method]["responses"], (path, status)
        if status == 401:
            assert response.headers["WWW-Authenticate"] == "Bearer" and body.error.reason
    with api.http(agent) as http:
        unknown = http.get("/v1/no-such-route")
    assert unknown.status_code == 404 and ErrorBody.model_validate(unknown.json()).error.type == "http_error"


def _request_examples(op: dict[str, Any]) -> dict[str, Any]:
    return op["requestBody"]["content"]["application/json"].get("examples", {})


def _concrete(path: str) -> str:
    """A path template with ids that exist nowhere (a key id is 24 hex digits)."""
    return re.sub(r"\{key_id\}", "0" * 24, re.sub(r"\{[a-z_]+_id\}", str(uuid.uuid4()), path))


def test_every_request_body_example_is_accepted_by_the_running_api(api, spec):
    """Each documented example, sent as /docs "Try it out" would, is valid input: never 422. The
    keys are operator keys without a scope limit, so role and scope checks pass; ids in the
    examples exist nowhere (404), and the example reports are another owner's (403 owner_mismatch),
    except that the holdout example's relevant memory is made to exist (registration checks it)
    and forgetting an owner is sent last, by a key of the owner the example spells out."""
    client = api.client
    reader = client.create_api_key(READER, role="operator").api_key
    forgetter = client.create_api_key(EXAMPLE_OWNER, role="operator").api_key
    client.store_memory(READER, {"id": EXAMPLE_NODE_ID, "content": "The cat's annual checkup costs 80 euros"})
    sends = []
    for path, method, op in _operations(spec):
        if "requestBody" not in op:
            continue
        examples = _request_examples(op)
        assert examples, f"{method.upper()} {path} has no request example"
        key = forgetter if path == "/v1/owner/forget" else reader
        sends += [(path == "/v1/owner/forget", path, method, op, name, e["value"], key) for name, e in examples.items()]
    for _, path, method, op, name, value, key in sorted(sends, key=lambda s: s[0]):
        with api.http(key) as http:
            response = http.request(method.upper(), _concrete(path), json=value)
        where = f"{method.upper()} {path} example {name!r}"
        assert response.status_code != 422, f"{where}: {response.text}"
        assert str(response.status_code) in op["responses"], f"{where} answered an undocumented {response.text}"
