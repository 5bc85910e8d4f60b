"""PostgreSQL backend (psycopg 3 with a connection pool): the production store.

Per-key serialization uses ``pg_advisory_xact_lock`` on a 64-bit key derived from SHA-256, held
until the transaction ends. The optional URL parameter ``prme_schema`` puts every table in that
schema (created if missing), which is how tests isolate themselves on one server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import pyarrow as pa
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from prme_core.errors import DuplicateKey, StoreUnavailable
from prme_core.storage.base import SqlStore
from prme_core.storage.erasure import OWNER_TABLES
from prme_core.storage.records import Vacuumed
from prme_core.storage.url import StoreURL

_QMARK = re.compile(r"\?")
VACUUM_TABLES = (*OWNER_TABLES, "deletions")


def _to_pyformat(sql: str) -> str:
    return _QMARK.sub("%s", sql.replace("%", "%%"))


def advisory_key(key: str) -> int:
    """A signed 64-bit advisory lock key from the first 8 bytes of SHA-256(key)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big", signed=True)


@contextmanager
def _unique_violations() -> Iterator[None]:
    try:
        yield
    except psycopg.errors.UniqueViolation as exc:
        raise DuplicateKey(f"duplicate key: {exc}") from exc


class _PgConnection:
    def __init__(self, raw: psycopg.Connection) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self.raw.cursor() as cur, _unique_violations():
            if params:
                cur.execute(_to_pyformat(sql), list(params))
            else:
                cur.execute(sql)
            return max(cur.rowcount, 0)

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self.raw.cursor() as cur, _unique_violations():
            cur.execute(_to_pyformat(sql), list(params))
            return cur.fetchall()

    def fetch_arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        with self.raw.cursor() as cur:
            cur.execute(_to_pyformat(sql), list(params))
            names = [d.name for d in cur.description]
            rows = cur.fetchall()
        return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})

    def stream_arrow(self, sql: str, params: Sequence[Any] = (), batch_rows: int = 4096) -> Iterator[pa.RecordBatch]:
        """One query read back in batches of Arrow rows."""
        with self.raw.cursor() as cur:
            cur.execute(_to_pyformat(sql), list(params))
            names = [d.name for d in cur.description]
            while rows := cur.fetchmany(batch_rows):
                yield pa.RecordBatch.from_pydict({n: [r[i] for r in rows] for i, n in enumerate(names)})

    def bulk_insert(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        if not rows:
            return
        with self.raw.cursor() as cur:
            with _unique_violations(), cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    def insert_arrow(self, table: str, data: pa.Table) -> None:
        columns = data.column_names
        self.bulk_insert(table, columns, list(zip(*(data.column(c).to_pylist() for c in columns))))

    def sha256_sql(self, column: str) -> str | None:
        return f"encode(sha256(convert_to({column}, 'UTF8')), 'hex')"

    id_batch = 5000  # index lookups: batches keep each array parameter modest

    @contextmanager
    def id_filter(self, column: str, ids: Sequence[str]) -> Iterator[tuple[str, list[Any]]]:
        """A WHERE fragment restricting ``column`` to ``ids`` (an array parameter)."""
        yield f"{column} = ANY(?)", [list(ids)]

    def lock_key(self, key: str) -> None:
        with self.raw.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [advisory_key(key)])


CONNECT_TIMEOUT_S = 5
"""How long opening a store waits for the server to answer (libpq ``connect_timeout``)."""


def unreachable_message(url: StoreURL, exc: BaseException) -> str:
    """One line naming the server, database and user, with the server's (or libpq's) own reason."""
    try:
        info = conninfo_to_dict(url.target)
    except psycopg.Error:
        info = {}
    where = (
        f"host {info.get('host') or 'localhost'}, port {info.get('port') or 5432}, "
        f"database {info.get('dbname') or '(default)'}, user {info.get('user') or '(default)'}"
    )
    reason = " ".join(str(exc).split()).rstrip(".") or type(exc).__name__
    return (
        f"cannot connect to PostgreSQL ({where}; {url.redacted()}): {reason} — check the store URL "
        "(PRME_STORE_URL or --store) and that the server runs and accepts this user and database"
    )


class PostgresStore(SqlStore):
    """PostgreSQL through a psycopg 3 pool (``pool_size`` URL option, default 4)."""

    backend = "postgresql"

    def __init__(self, url: StoreURL) -> None:
        self._url = url
        schema = url.options.get("prme_schema")
        size = int(url.options.get("pool_size", "4"))
        kwargs: dict[str, Any] = {"autocommit": False}
        if schema:
            kwargs["options"] = f"-c search_path={schema}"
        try:  # one direct connection first: the server's own refusal arrives at once, with its reason
            probe = psycopg.connect(url.target, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise StoreUnavailable(unreachable_message(url, exc)) from exc
        with probe:
            if schema:
                try:
                    probe.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                except psycopg.Error as exc:
                    raise StoreUnavailable(
                        f"cannot create schema {schema!r} on {url.redacted()}: {' '.join(str(exc).split())}"
                    ) from exc
        try:
            self._pool = ConnectionPool(url.target, min_size=1, max_size=size, kwargs=kwargs, open=True, timeout=30)
            self._pool.wait(timeout=10)
        except (psycopg.Error, Exception) as exc:  # the pool wraps connection errors in its own types
            raise StoreUnavailable(f"cannot reach PostgreSQL at {url.redacted()}: {exc}") from exc
        super().__init__()

    @property
    def url(self) -> str:
        return self._url.redacted()

    @contextmanager
    def _begin(self, autocommit: bool = False) -> Iterator[_PgConnection]:
        """Always a transaction: PostgreSQL gains nothing from autocommit here."""
        if self._pool is None:
            raise StoreUnavailable("the store is closed; open a new one")
        with self._pool.connection() as raw:
            with raw.transaction():
                yield _PgConnection(raw)

    def vacuum(self) -> Vacuumed:
        """VACUUM FULL every PRME table, so that deleted rows leave the table files (each table is
        rewritten into new files and the old ones removed); the tables' size before and after.
        Takes each table's exclusive lock while it is rewritten. PostgreSQL's write-ahead log
        keeps the deleted bytes until the server recycles its segments."""
        if self._pool is None:
            raise StoreUnavailable("the store is closed; open a new one")
        schema = self._url.options.get("prme_schema")
        options = {"options": f"-c search_path={schema}"} if schema else {}
        size = (
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c WHERE c.oid = ANY(%s::regclass[])"
        )
        with psycopg.connect(self._url.target, autocommit=True, **options) as conn:
            tables = [t for t in VACUUM_TABLES if conn.execute("SELECT to_regclass(%s)", [t]).fetchone()[0]]  # type: ignore[index]
            before = int(conn.execute(size, [tables]).fetchone()[0])  # type: ignore[index]
            for table in tables:
                conn.execute(f"VACUUM FULL {table}")
            after = int(conn.execute(size, [tables]).fetchone()[0])  # type: ignore[index]
        return Vacuumed(before, after)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def drop_schema(self) -> None:
        """Drop this store's ``prme_schema`` (tests only; refuses without one)."""
        schema = self._url.options.get("prme_schema")
        if not schema:
            raise StoreUnavailable("drop_schema needs a prme_schema option")
        self.close()
        with psycopg.connect(self._url.target, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
