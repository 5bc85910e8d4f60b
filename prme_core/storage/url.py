"""Parse ``PRME_STORE_URL`` into a backend choice: ``duckdb:///path`` or ``postgresql://…``."""

from __future__ import annotations

import math
import os
import re
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

    def identity(self) -> str:
        """Which store this is, whatever the spelling or credentials: the absolute DuckDB file
        (or ``:memory:``), or the PostgreSQL host, port, database and ``prme_schema``."""
        if self.backend == "duckdb":
            path = duckdb_path(self.target)
            return f"duckdb:{':memory:' if path is None else path.expanduser().resolve()}"
        parts = urlsplit(self.target)
        host = (parts.hostname or "localhost").lower()
        database = parts.path.lstrip("/") or "(default)"
        schema = self.options.get("prme_schema", "public")
        try:
            port = parts.port or 5432
        except ValueError:  # not a number: libpq will refuse it; the identity keeps the text
            port = parts.netloc.rsplit(":", 1)[-1]
        return f"postgresql://{host}:{port}/{database}?prme_schema={schema}"


_DUCKDB_OPTIONS = {"lock_timeout"}
_POSTGRES_OPTIONS = {"prme_schema", "pool_size"}
MAX_LOCK_TIMEOUT_S = 3600.0
MAX_POOL_SIZE = 100
# An unquoted PostgreSQL identifier that folds to itself: lowercase, so the quoted CREATE SCHEMA
# and the unquoted search_path name the same schema; "pg_" is reserved for system schemas.
SCHEMA_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,62}")


def _check_options(options: dict[str, str]) -> dict[str, str]:
    """Validate PRME's own URL options; the returned values parse with ``float``/``int`` as is."""
    if "lock_timeout" in options:
        value = options["lock_timeout"]
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and 0.0 <= seconds <= MAX_LOCK_TIMEOUT_S):
            raise InvalidInput(
                "store_url.lock_timeout", f"must be a number of seconds in 0..{MAX_LOCK_TIMEOUT_S:g}, got {value!r}"
            )
    if "pool_size" in options:
        value = options["pool_size"]
        if not (value.isascii() and value.isdigit() and 1 <= int(value) <= MAX_POOL_SIZE):
            raise InvalidInput(
                "store_url.pool_size", f"must be a whole number of connections in 1..{MAX_POOL_SIZE}, got {value!r}"
            )
    if "prme_schema" in options:
        value = options["prme_schema"]
        if SCHEMA_NAME_PATTERN.fullmatch(value) is None or value.startswith("pg_"):
            raise InvalidInput(
                "store_url.prme_schema",
                "must be a lowercase letter followed by at most 62 lowercase "
                f"letters, digits or _ (and not start with pg_), got {value!r}",
            )
    return options


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
        options = dict(parse_qsl(query, keep_blank_values=True))
        unknown = set(options) - _DUCKDB_OPTIONS
        if unknown:
            raise InvalidInput(
                "store_url", f"unknown DuckDB options {sorted(unknown)}; allowed: {sorted(_DUCKDB_OPTIONS)}"
            )
        return StoreURL("duckdb", path, _check_options(options))
    if url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        parts = urlsplit(url)
        scheme = "postgresql"
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        options = {k: v for k, v in pairs if k in _POSTGRES_OPTIONS}
        passthrough = [(k, v) for k, v in pairs if k not in _POSTGRES_OPTIONS]
        dsn = urlunsplit((scheme, parts.netloc, parts.path, urlencode(passthrough), ""))
        return StoreURL("postgresql", dsn, _check_options(options))
    raise InvalidInput("store_url", f"unsupported scheme in {url.split(':', 1)[0]!r}; use duckdb:/// or postgresql://")


def store_url_from_env(default: str = DEFAULT_STORE_URL) -> str:
    """The store URL from ``PRME_STORE_URL``, or the embedded default."""
    return os.environ.get(STORE_URL_ENV) or default


def duckdb_path(target: str) -> Path | None:
    """The file path of a DuckDB target, or None for an in-memory database."""
    return None if target == ":memory:" else Path(target)
