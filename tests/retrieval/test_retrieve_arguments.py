"""The retrieval arguments are declared once (``RetrieveArguments``): the Python client's
signature, the HTTP body and the MCP tool schema are that declaration."""

from __future__ import annotations

import inspect

from prme_api.models import RetrieveRequest
from prme_core.engine import MemoryClient, MemoryEngine
from prme_core.retrieval.requests import RetrieveArguments


def test_the_client_signature_is_the_declaration_with_its_defaults():
    parameters = inspect.signature(MemoryClient.retrieve).parameters
    declared = RetrieveArguments.model_fields
    assert list(parameters) == ["self", "query", "owner", *declared]
    for name, field in declared.items():
        assert parameters[name].default == field.default, name
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_engine_coroutine_wraps_the_same_signature():
    assert inspect.signature(MemoryEngine.retrieve.method) == inspect.signature(MemoryClient.retrieve)


def test_the_http_body_is_the_declaration_plus_the_query_and_the_response_options():
    assert set(RetrieveRequest.model_fields) == {
        "query",
        "include_context",
        "include_bundle",
        *RetrieveArguments.model_fields,
    }
    schema = RetrieveRequest.model_json_schema()
    assert all(prop.get("description") for prop in schema["properties"].values())
