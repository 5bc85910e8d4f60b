"""Parse ``PRME_STORE_URL`` into a backend choice: ``duckdb:///path`` or ``postgresql://…``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from prme_core.errors import InvalidInput

DEFAULT_STORE_URL = "duckdb:///.prme/prme.duckdb"
STORE_URL_ENV = "PRME_STORE_URL"


@dataclass(frozen=True)
class StoreURL:
    """A parsed store location. ``options`` are PRME's own query parameters."""

    backend: str  # "duckdb" or "postgresql"
    target: str  # file path (or ":memory:") for duckdb, libpq DSN for postgresql
    options: dict[str, str] = field(default_factory=dict)

    def redacted(self) -> str:
        """The URL without a password, for logs and metadata."""
        if self.backend == "duckdb":
            return f"duckdb:///{self.target}"
        parts = urlsplit(self.target)
        netloc = parts.netloc
        if "@" in netloc:
            user, host = netloc.rsplit("@", 1)
            netloc = f"{user.split(':', 1)[0]}:***@{host}" if ":" in user else netloc
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


_DUCKDB_OPTIONS = {"lock_timeout"}
_POSTGRES_OPTIONS = {"prme_schema", "pool_size"}


def parse_store_url(url: str) -> StoreURL:
    """Parse a store URL; raise ``InvalidInput`` naming what is wrong."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("store_url", "must be a non-empty URL such as duckdb:///data/prme.duckdb")
    url = url.strip()
    if url.startswith("duckdb:"):
        rest = url[len("duckdb:") :]
        if not rest.startswith("///"):
            raise InvalidInput("store_url", "a DuckDB URL is duckdb:///relative/path or duckdb:////absolute/path")
        path, _, query = rest[3:].partition("?")
        if not path:
            raise InvalidInput("store_url", "a DuckDB URL needs a file path (or :memory:)")
        options = dict(parse_qsl(query))
        unknown = set(options) - _DUCKDB_OPTIONS
        if unknown:
            raise InvalidInput("store_url", f"unknown DuckDB options {sorted(unknown)}; allowed: {sorted(_DUCKDB_OPTIONS)}")
        return StoreURL("duckdb", path, options)
    if url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        parts = urlsplit(url)
        scheme = "postgresql"
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        options = {k: v for k, v in pairs if k in _POSTGRES_OPTIONS}
        passthrough = [(k, v) for k, v in pairs if k not in _POSTGRES_OPTIONS]
        dsn = urlunsplit((scheme, parts.netloc, parts.path, urlencode(passthrough), ""))
        schema = options.get("prme_schema")
        if schema is not None and not (schema.replace("_", "a").isalnum() and schema[:1].isalpha() and len(schema) <= 63):
            raise InvalidInput("store_url", "prme_schema must be a letter followed by letters, digits or _ (≤ 63)")
        return StoreURL("postgresql", dsn, options)
    raise InvalidInput("store_url", f"unsupported scheme in {url.split(':', 1)[0]!r}; use duckdb:/// or postgresql://")


def store_url_from_env(default: str = DEFAULT_STORE_URL) -> str:
    """The store URL from ``PRME_STORE_URL``, or the embedded default."""
    return os.environ.get(STORE_URL_ENV) or default


def duckdb_path(target: str) -> Path | None:
    """The file path of a DuckDB target, or None for an in-memory database."""
    return None if target == ":memory:" else Path(target)
