"""Storage: the ``Store`` protocol, its DuckDB and PostgreSQL backends and ``open_store``."""

from __future__ import annotations

from prme_core.storage.base import Store
from prme_core.storage.records import AppliedMigration, OperationDraft, StoredOperation
from prme_core.storage.session import StoreSession
from prme_core.storage.url import DEFAULT_STORE_URL, StoreURL, parse_store_url, store_url_from_env


def open_store(url: str | None = None) -> Store:
    """Open (and migrate) the store at ``url``, or at ``PRME_STORE_URL``, or the embedded default."""
    parsed = parse_store_url(url if url is not None else store_url_from_env())
    if parsed.backend == "duckdb":
        from prme_core.storage.duckdb_backend import DuckDBStore

        return DuckDBStore(parsed)
    from prme_core.storage.postgres_backend import PostgresStore

    return PostgresStore(parsed)


__all__ = [
    "AppliedMigration",
    "DEFAULT_STORE_URL",
    "OperationDraft",
    "Store",
    "StoreSession",
    "StoreURL",
    "StoredOperation",
    "open_store",
    "parse_store_url",
    "store_url_from_env",
]
