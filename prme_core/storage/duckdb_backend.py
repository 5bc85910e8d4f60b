"""DuckDB backend: one embedded file, one connection per process, writes serialized by a lock.

DuckDB admits one read-write process per file. Opening retries with backoff while another
process holds the lock (``lock_timeout`` seconds, default 60), which is what lets Dagster's
multiprocess executor share the embedded file: each step opens, works and closes. Within a
process every store on one file takes turns under one lock (DuckDB gives them one shared
database), and a store refuses to work in a process it was not opened in (after ``fork``).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from prme_core.errors import DuplicateKey, StoreDamaged, StoreLocked, StoreUnavailable
from prme_core.storage.base import SqlStore
from prme_core.storage.records import Vacuumed
from prme_core.storage.schema import MIGRATION_REFUSED
from prme_core.storage.url import StoreURL, duckdb_path

_UNNEST_INSERT_MAX_ROWS = 2000
_INSERT_CHUNK_ROWS = 10_000
_INSERT_CHUNK_CHARS = 16 * 1024 * 1024
_WRITE_MEMORY_LIMIT = "512MiB"  # DuckDB memory during a large write; past it, data spills beside the file
_FILE_LOCKS: dict[str, threading.RLock] = {}
_FILE_LOCKS_GUARD = threading.Lock()
_INHERITED: list[duckdb.DuckDBPyConnection] = []  # forked copies, kept from closing (see close)
_OPEN_STORES: dict[str, int] = {}  # open stores per file in this process (vacuum needs the only one)
_STATE_VERSIONS: dict[str, list[int]] = {}  # per file: see DuckDBStore.state_version
_APPENDS_ONLY = re.compile(r"\s*(SELECT\b|INSERT\s+INTO\s+(operations|receipt_projections)\s*\()", re.IGNORECASE)
"""Statements that cannot change what ``state_version`` vouches for: reads, and appends to the
operations log and the receipt projections (what a retrieval writes). Anything else, and any
text holding more than one statement, counts as a change."""


def _changes_state(sql: str) -> bool:
    return ";" in sql or _APPENDS_ONLY.match(sql) is None


_ROW_INSERT = re.compile(r"\s*INSERT\s+INTO\s+\w+\s*\([\w\s,]*\)\s*VALUES\s*\([?,\s]*\)(\s+RETURNING\s+\w+)?\s*$", re.I)
"""One row of bound values, in autocommit: what saving a retrieval runs. DuckDB's optimizer has
nothing to do for it and costs ~0.2 ms of its ~1.5 ms, so such a statement runs on a second
connection to the same database with the optimizer off (``_DuckConnection.row_inserts``)."""


def _file_lock(target: str) -> threading.RLock:
    """The lock of a database file in this process. DuckDB hands every connection to one file
    the same database, whose transactions are optimistic: two stores writing it at once made
    idempotent retries fail with a duplicate key instead of reading the first record back."""
    path = duckdb_path(target)
    if path is None:
        return threading.RLock()  # each ":memory:" connection is its own database
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(str(path.resolve()), threading.RLock())


def _state_counter(target: str) -> list[int]:
    """The state version cell of a database file, shared by every store on it in this process
    (a one-element list, changed only under the file's lock)."""
    path = duckdb_path(target)
    if path is None:
        return [0]  # each ":memory:" connection is its own database
    with _FILE_LOCKS_GUARD:
        return _STATE_VERSIONS.setdefault(str(path.resolve()), [0])


@contextmanager
def _duplicate_keys() -> Iterator[None]:
    try:
        yield
    except duckdb.ConstraintException as exc:
        if "duplicate key" in str(exc).lower():
            raise DuplicateKey(f"duplicate key: {exc}") from exc
        raise


class _DuckConnection:
    def __init__(self, raw: duckdb.DuckDBPyConnection, spills: bool = False, state: list[int] | None = None) -> None:
        self.raw = raw
        self._spills = spills  # a file database can spill to the temporary directory beside it
        self._memory_bounded = False  # a large write lowered the memory limit until its transaction ends
        self.state = [0] if state is None else state  # the file's state version (DuckDBStore.state_version)
        self.in_transaction = False  # inside BEGIN … COMMIT: a change counts when the transaction ends
        self.changed = False  # a statement of the open transaction may have changed state
        self._row_inserts: duckdb.DuckDBPyConnection | None = None

    def note(self, sql: str) -> None:
        """Count a statement that may change state: at once in autocommit, at the end of an
        open transaction (whether it commits or not: counting too often only costs a read)."""
        if _changes_state(sql):
            if self.in_transaction:
                self.changed = True
            else:
                self.state[0] += 1

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        result = self.fetchall(sql, params)
        return int(result[0][0]) if result and result[0] and isinstance(result[0][0], int) else 0

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        raw = self.raw if self.in_transaction or _ROW_INSERT.match(sql) is None else self.row_inserts()
        try:
            with _duplicate_keys():
                return raw.execute(sql, list(params)).fetchall()
        finally:
            self.note(sql)

    def row_inserts(self) -> duckdb.DuckDBPyConnection:
        """The connection for single-row INSERTs in autocommit (``_ROW_INSERT``): a cursor of
        the same database, so each insert is committed and visible to the next statement on
        either, with the optimizer off. Opened on first use, closed with ``close``."""
        if self._row_inserts is None:
            cursor = self.raw.cursor()
            cursor.execute("PRAGMA disable_optimizer")
            self._row_inserts = cursor
        return self._row_inserts

    def close(self) -> None:
        """Close the row-insert connection (the caller closes ``raw``)."""
        cursor, self._row_inserts = self._row_inserts, None
        if cursor is not None:
            cursor.close()

    def fetch_arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        try:
            return self.raw.sql(sql, params=list(params)).to_arrow_table()
        finally:
            self.note(sql)

    def stream_arrow(self, sql: str, params: Sequence[Any] = (), batch_rows: int = 4096) -> Iterator[pa.RecordBatch]:
        """One query, read back in Arrow batches (one scan, bounded memory)."""
        try:
            yield from self.raw.sql(sql, params=list(params)).to_arrow_reader(batch_rows)
        finally:
            self.note(sql)

    def bulk_insert(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Insert ``rows`` in bounded statements inside the caller's transaction (which keeps
        the batch atomic): at most ``_INSERT_CHUNK_ROWS`` rows and about
        ``_INSERT_CHUNK_CHARS`` characters of text per statement, so what one statement
        converts stays small whatever the batch size. A batch of several chunks also bounds
        DuckDB's memory until the transaction ends (see ``_bound_memory``)."""
        self.note(f"INSERT INTO {table} (")
        for chunk in _insert_chunks(rows):
            if len(chunk) < len(rows):
                self._bound_memory()
            self._insert_chunk(table, columns, chunk)

    def _insert_chunk(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        names = ", ".join(columns)
        if len(rows) == 1:
            self.fetchall(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})", list(rows[0]))
        elif len(rows) <= _UNNEST_INSERT_MAX_ROWS:
            # One statement with one list parameter per column: DuckDB's per-statement cost
            # dominates small writes, and unnest binds far faster than a VALUES list.
            lists = [list(column) for column in zip(*rows)]
            self.fetchall(f"INSERT INTO {table} ({names}) SELECT {', '.join('unnest(?)' for _ in columns)}", lists)
        else:
            # Larger chunks convert faster through Arrow. DuckDB finds the table by this local
            # variable's name (a replacement scan); ``register`` would keep the table's data
            # alive until the transaction ends, outside DuckDB's memory limit, and a relation's
            # ``query`` hides a constraint error behind "transaction is aborted".
            _prme_batch = pa.table({name: [row[i] for row in rows] for i, name in enumerate(columns)})
            with _duplicate_keys():  # the scan looks in the frame that calls execute: this one
                self.raw.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM _prme_batch").fetchall()

    def _bound_memory(self) -> None:
        """Hold DuckDB to ``_WRITE_MEMORY_LIMIT`` until this transaction ends. Its uncommitted
        rows stay in DuckDB's memory until COMMIT (a 50,000-memory batch of 64 KiB contents is
        ~4 GiB per table); under the bound they spill beside the file instead of growing the
        process. Reads keep DuckDB's default limit, which large result sets need."""
        if self._spills and not self._memory_bounded:
            self.raw.execute(f"SET memory_limit = '{_WRITE_MEMORY_LIMIT}'")
            self._memory_bounded = True

    @contextmanager
    def memory_bound_released(self) -> Iterator[None]:
        """Around a transaction: when it ends, restore DuckDB's default memory limit if a large
        write lowered it (RESET, not the value read before: DuckDB rounds what it reports)."""
        try:
            yield
        finally:
            if self._memory_bounded:
                self._memory_bounded = False
                with suppress(duckdb.Error):  # a failed restore must not hide the transaction's own error
                    self.raw.execute("RESET memory_limit")

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
        self._local = threading.local()
        path = duckdb_path(url.target)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _file_lock(url.target)
        self._pid = os.getpid()
        self._timeout = float(url.options.get("lock_timeout", "60"))
        self._raw = _connect_with_backoff(url.target, self._timeout)
        self._conn = _DuckConnection(self._raw, spills=path is not None, state=_state_counter(url.target))
        with _FILE_LOCKS_GUARD:
            _OPEN_STORES[url.target] = _OPEN_STORES.get(url.target, 0) + 1
        try:
            super().__init__()
        except BaseException:
            with suppress(Exception):  # a store that failed to open keeps no connection to the file
                self.close()
            raise

    @property
    def url(self) -> str:
        return self._url.redacted()

    def _check_process(self) -> None:
        """A forked child holds a private copy of the parent's database: its writes would be
        acknowledged, then lost or overwritten by the parent's, so it may not use the store."""
        if os.getpid() != self._pid:
            raise StoreUnavailable(
                f"this DuckDB store was opened in process {self._pid} and inherited by process {os.getpid()} "
                "(fork); a DuckDB connection cannot cross processes: open a new store in this process"
            )

    @contextmanager
    def _begin(self, autocommit: bool = False) -> Iterator[_DuckConnection]:
        self._check_process()
        with self._lock:
            if self._raw is None:
                raise StoreUnavailable("the store is closed; open a new one")
            with _damage_reported(self._url.target), self._conn.memory_bound_released():
                if autocommit:  # single statements in autocommit: no BEGIN/COMMIT round trips
                    yield self._conn
                    return
                self._raw.execute("BEGIN TRANSACTION")
                conn = self._conn
                conn.in_transaction, conn.changed = True, False
                try:
                    try:
                        yield conn
                    except BaseException as exc:
                        try:
                            self._raw.execute("ROLLBACK")
                        except duckdb.Error:
                            if not isinstance(exc, duckdb.Error):
                                raise  # else DuckDB's first error (the database may be invalidated) is the news
                        raise
                    self._raw.execute("COMMIT")
                finally:
                    conn.in_transaction = False
                    if conn.changed:  # counted once the change is visible (or gone), never before
                        conn.state[0] += 1

    def state_version(self) -> int:
        """A number that changes (within this process) whenever a finished transaction or
        statement on this database may have changed anything but the operations log and the
        receipt projections by appending to them. DuckDB admits one read-write process per file
        and every store of this process on the file shares the number, so an unchanged number
        means every other table reads as before: a reader that records it *before* reading may
        reuse what it read while it stays the same (``profiles.resolution``)."""
        return self._conn.state[0]

    def close(self) -> None:
        if os.getpid() != self._pid:
            # Closing the forked copy could checkpoint it into the parent's file; keep it open.
            if self._raw is not None:
                _INHERITED.append(self._raw)
                self._raw = None
            return
        with self._lock:
            if self._raw is not None:
                raw, self._raw = self._raw, None
                with _FILE_LOCKS_GUARD:
                    _OPEN_STORES[self._url.target] = max(0, _OPEN_STORES.get(self._url.target, 1) - 1)
                with _damage_reported(self._url.target):
                    self._conn.close()
                    raw.close()

    def vacuum(self) -> Vacuumed:
        """Rewrite the database file so that deleted rows leave it (its size before and after).

        DuckDB frees a deleted row's blocks at a checkpoint but keeps their bytes in the file
        until they are reused; a copy of the database into a fresh file holds only live rows. The
        copy is written beside the file and moved over it in one rename, so a crash leaves either
        the old file or the new one, whole. Needs this store to be the only one open on the file
        in this process (they share one database); an in-memory store has nothing to rewrite."""
        path = duckdb_path(self._url.target)
        self._check_process()
        with self._lock:
            if self._raw is None:
                raise StoreUnavailable("the store is closed; open a new one")
            if path is None:
                return Vacuumed(0, 0)
            with _FILE_LOCKS_GUARD:
                others = _OPEN_STORES.get(self._url.target, 0) - 1
            if others > 0:
                raise StoreUnavailable(
                    f"cannot vacuum {str(path)!r}: {others} other store(s) in this process have it open; close them first"
                )
            fresh = path.with_name(path.name + ".vacuum")
            for leftover in (fresh, fresh.with_name(fresh.name + ".wal")):
                leftover.unlink(missing_ok=True)
            before = path.stat().st_size
            raw = self._raw
            with _damage_reported(self._url.target):
                raw.execute("CHECKPOINT")
                database = raw.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
                quoted = str(fresh).replace("'", "''")
                raw.execute(f"ATTACH '{quoted}' AS prme_vacuum")
                try:
                    raw.execute(f'COPY FROM DATABASE "{database}" TO prme_vacuum')
                finally:
                    raw.execute("DETACH prme_vacuum")
                self._raw = None
                self._conn.close()
                raw.close()
            try:
                os.replace(fresh, path)
            finally:  # reopen the file that is there now (the old one if the rename failed)
                self._raw = _connect_with_backoff(self._url.target, self._timeout)
                self._conn = _DuckConnection(self._raw, spills=True, state=self._conn.state)
                self._conn.state[0] += 1  # a new file under the same name
            return Vacuumed(before, path.stat().st_size)


def _insert_chunks(rows: Sequence[tuple]) -> Iterator[Sequence[tuple]]:
    """Consecutive slices of ``rows``, each within the row and text bounds (text and binary
    values count by length; a single row larger than the text bound is a slice of its own)."""
    start, chars = 0, 0
    for i, row in enumerate(rows):
        size = sum(len(v) for v in row if isinstance(v, str | bytes))
        if i > start and (i - start >= _INSERT_CHUNK_ROWS or chars + size > _INSERT_CHUNK_CHARS):
            yield rows[start:i]
            start, chars = i, 0
        chars += size
    if start < len(rows):
        yield rows[start:]


# Phrases of DuckDB errors that come from the bytes of the file, not from the SQL: truncation,
# failed checksums, undecodable metadata or segments. ("checksum" alone would also match a
# column of that name quoted in an ordinary SQL error.)
_DAMAGE_PHRASES = (
    "not a valid duckdb database file",
    "could not read enough bytes",
    "stored checksum",
    "corrupt",
    "failed to deserialize",
    "metadata block index",
    "does not point to an allocated segment",
)


def _damage(target: str, exc: duckdb.Error) -> StoreDamaged | None:
    """The typed error for a DuckDB failure caused by a damaged file or WAL, or None. Errors
    about the statement or its values (binder, catalog, constraint, conversion) are never
    damage, even when a value they quote happens to contain a damage phrase."""
    if isinstance(exc, (duckdb.ProgrammingError, duckdb.IntegrityError, duckdb.DataError)):
        return None
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = str(exc).lower()
    internal = isinstance(exc, duckdb.InternalException)
    if not (internal or isinstance(exc, duckdb.SerializationException) or any(p in lowered for p in _DAMAGE_PHRASES)):
        return None
    if "replaying wal" in lowered or "wal file" in lowered:
        return StoreDamaged(
            target,
            (
                f"the write-ahead log {target}.wal of the DuckDB store {target} is damaged ({text}). Restore the "
                f"store and its .wal from a backup, or move {target}.wal aside to open the store as of its last "
                "checkpoint (writes recorded only in that log are then lost)"
            ),
        )
    cause = f"DuckDB failed internally reading it ({text})" if internal else text
    return StoreDamaged(
        target,
        (
            f"the DuckDB file {target} is damaged: {cause}; the operation was abandoned. Restore the file from a "
            f"backup, or move it (and {target}.wal if present) aside to start an empty store in its place"
        ),
    )


@contextmanager
def _damage_reported(target: str) -> Iterator[None]:
    """Re-raise DuckDB errors caused by a damaged file as ``StoreDamaged``; others pass unchanged.

    A signal handler's exception (Ctrl-C) during a query reaches Python as DuckDB's
    ``RuntimeError("Query interrupted")``, which any ``except Exception`` would swallow; it is
    re-raised as the ``KeyboardInterrupt`` it stands for."""
    try:
        yield
    except duckdb.Error as exc:
        if MIGRATION_REFUSED in str(exc):  # a migration found rows it cannot change faithfully
            raise StoreDamaged(target, str(exc).split(MIGRATION_REFUSED, 1)[1].strip()) from exc
        damaged = _damage(target, exc)
        if damaged is None:
            raise
        raise damaged from exc
    except RuntimeError as exc:
        if str(exc) == "Query interrupted":
            raise KeyboardInterrupt(f"DuckDB query on {target} interrupted") from exc
        raise


def _lock_conflict(exc: duckdb.Error) -> bool:
    text = str(exc).lower()
    return "could not set lock" in text or "conflicting lock" in text


def _lock_holder(message: str) -> str | None:
    """The process DuckDB names as the lock's holder ("… (PID 1234)"), with its command line
    when this system shows it (``/proc/<pid>/cmdline``)."""
    match = re.search(r"PID (\d+)", message)
    if match is None:
        return None
    pid = int(match.group(1))
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = ""
    return f"process {pid}" + (f" ({command})" if command else "")


def _connect_with_backoff(target: str, timeout_s: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        try:
            return duckdb.connect(target)
        except duckdb.Error as exc:
            if not _lock_conflict(exc):
                damaged = _damage(target, exc)
                if damaged is not None:
                    raise damaged from exc
                raise StoreUnavailable(f"cannot open DuckDB file {target!r}: {exc}") from exc
            if time.monotonic() + delay > deadline:
                holder = _lock_holder(str(exc))
                raise StoreLocked(
                    f"cannot open DuckDB file {target!r}. Another process holds it"
                    f"{f' ({holder})' if holder else ''}; close that process or raise lock_timeout "
                    f"(waited {timeout_s:g}s)",
                    holder=holder,
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
