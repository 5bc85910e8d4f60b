"""PRME's surfaces: the HTTP API (``prme serve``) and the MCP server (``prme mcp``).

Both translate to one service over ``prme_core.MemoryEngine`` (``prme_api.service``); the owner
of every request is its API key's (``prme_core.access``). This package imports ``prme_core``
only, never Dagster or the storage internals.
"""
