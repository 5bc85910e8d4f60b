"""DuckDB backend: one embedded file, one connection per process, writes serialized by a lock.

DuckDB admits one read-write process per file. Opening retries with backoff while another
process holds the lock (``lock_timeout`` seconds, default 60), which is what lets Dagster's
multiprocess executor share the embedded file: each step opens, works and closes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa

from prme_core.errors import DuplicateKey, StoreUnavailable
from prme_core.storage.base import SqlStore
from prme_core.storage.url import StoreURL, duckdb_path

_UNNEST_INSERT_MAX_ROWS = 2000


class _DuckConnection:
    def __init__(self, raw: duckdb.DuckDBPyConnection) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        result = self.fetchall(sql, params)
        return int(result[0][0]) if result and result[0] and isinstance(result[0][0], int) else 0

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        try:
            return self.raw.execute(sql, list(params)).fetchall()
        except duckdb.ConstraintException as exc:
            if "duplicate key" in str(exc).lower():
                raise DuplicateKey(f"duplicate key: {exc}") from exc
            raise

    def fetch_arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        return self.raw.sql(sql, params=list(params)).to_arrow_table()

    def stream_arrow(self, sql: str, params: Sequence[Any] = (), batch_rows: int = 4096) -> Iterator[pa.RecordBatch]:
        """One query, read back in Arrow batches (one scan, bounded memory)."""
        yield from self.raw.sql(sql, params=list(params)).to_arrow_reader(batch_rows)

    def bulk_insert(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        if not rows:
            return
        if len(rows) == 1:
            marks = ", ".join("?" * len(columns))
            self.fetchall(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", list(rows[0]))
            return
        if len(rows) <= _UNNEST_INSERT_MAX_ROWS:
            # One statement with one list parameter per column: DuckDB's per-statement cost
            # dominates small writes, and unnest binds far faster than a VALUES list.
            lists = [list(column) for column in zip(*rows)]
            select = ", ".join("unnest(?)" for _ in columns)
            self.fetchall(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select}", lists)
            return
        arrays = {name: [row[i] for row in rows] for i, name in enumerate(columns)}
        self.insert_arrow(table, pa.table(arrays))

    def insert_arrow(self, table: str, data: pa.Table) -> None:
        """Insert an Arrow table whose column names match ``table``'s columns."""
        view = f"_prme_batch_{threading.get_ident()}"
        self.raw.register(view, data)
        try:
            cols = ", ".join(data.column_names)
            self.raw.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {view}")
        finally:
            self.raw.unregister(view)

    def sha256_sql(self, column: str) -> str | None:
        # DuckDB's sha256() runs at ~200 MB/s here; fetching the payload and hashing it with
        # hashlib (OpenSSL, SHA extensions) is several times faster, so hash client-side.
        return None

    id_batch = None  # one query for any number of ids: each query scans the table once

    @contextmanager
    def id_filter(self, column: str, ids: Sequence[str]) -> Iterator[tuple[str, list[Any]]]:
        """A WHERE fragment restricting ``column`` to ``ids``: a join against a registered
        Arrow table (one scan, whatever the number of ids)."""
        name = f"_prme_ids_{threading.get_ident()}"
        self.raw.register(name, pa.table({"id": pa.array(list(ids), type=pa.string())}))
        try:
            yield f"{column} IN (SELECT id FROM {name})", []
        finally:
            self.raw.unregister(name)

    def lock_key(self, key: str) -> None:
        # The connection lock already serializes every transaction in this process, and DuckDB's
        # file lock keeps other processes out, so a per-key lock has nothing left to add.
        return None


class DuckDBStore(SqlStore):
    """The embedded default store."""

    backend = "duckdb"

    def __init__(self, url: StoreURL) -> None:
        self._url = url
        self._lock = threading.RLock()
        self._local = threading.local()
        path = duckdb_path(url.target)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        timeout = float(url.options.get("lock_timeout", "60"))
        self._raw = _connect_with_backoff(url.target, timeout)
        self._conn = _DuckConnection(self._raw)
        super().__init__()

    @property
    def url(self) -> str:
        return self._url.redacted()

    @contextmanager
    def _begin(self, read_only: bool = False) -> Iterator[_DuckConnection]:
        with self._lock:
            if self._raw is None:
                raise StoreUnavailable("the store is closed; open a new one")
            if read_only:  # single statements in autocommit: no BEGIN/COMMIT round trips
                yield self._conn
                return
            self._raw.execute("BEGIN TRANSACTION")
            try:
                yield self._conn
            except BaseException:
                self._raw.execute("ROLLBACK")
                raise
            self._raw.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if self._raw is not None:
                self._raw.close()
                self._raw = None


def _connect_with_backoff(target: str, timeout_s: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        try:
            return duckdb.connect(target)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() + delay > deadline:
                raise StoreUnavailable(
                    f"cannot open DuckDB file {target!r}: {exc}. Another process holds it; "
                    f"close that process or raise lock_timeout (waited {timeout_s:g}s)"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
