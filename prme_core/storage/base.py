"""The ``Store`` protocol and the transaction and migration logic both SQL backends share."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, runtime_checkable

from prme_core.errors import StoreUnavailable
from prme_core.storage.records import AppliedMigration, Vacuumed
from prme_core.storage.schema import MIGRATIONS, RECEIPTS_PACKED_VERSION, migration_sql
from prme_core.storage.session import StoreSession
from prme_core.storage.sql import Connection
from prme_core.types import from_epoch_us, to_epoch_us, utc_now

MIGRATION_LOCK_KEY = "prme:schema-migrations"


@runtime_checkable
class Store(Protocol):
    """A PRME store: transactions over the memory tables and the append-only operations log."""

    backend: str

    @property
    def url(self) -> str: ...
    def transaction(
        self, read_only: bool = False, single_write: bool = False
    ) -> AbstractContextManager[StoreSession]: ...
    def applied_migrations(self) -> list[AppliedMigration]: ...
    def vacuum(self) -> Vacuumed: ...
    def close(self) -> None: ...
    def state_version(self) -> int | None: ...
    @property
    def folds_receipts(self) -> bool: ...


class SqlStore:
    """Shared behaviour: nested ``transaction()`` calls join the outer one; migrate on open."""

    backend: str = "sql"
    _receipts_folded = False  # set by migrate: see SessionBase.receipts_folded

    def __init__(self) -> None:
        self._active = threading.local()
        self.migrate()

    def _begin(self, autocommit: bool = False) -> AbstractContextManager[Connection]:  # pragma: no cover
        raise NotImplementedError

    @property
    def folds_receipts(self) -> bool:
        """Whether a receipt and its projection are one row (``StoreSession.append_receipt`` is
        then a single statement, see ``storage.sql.FOLDED_PROJECTION_COLUMNS``)."""
        return self._receipts_folded

    @contextmanager
    def transaction(self, read_only: bool = False, single_write: bool = False) -> Iterator[StoreSession]:
        """One atomic unit of work; everything in it commits together or not at all.

        ``read_only=True`` promises no writes, ``single_write=True`` at most one writing
        statement (atomic by itself); DuckDB then runs the statements in autocommit (each one
        consistent, the write its own transaction), which saves a round trip or two on the
        retrieval path. A transaction that wrote memory bumps the owners' memory revisions just
        before COMMIT.
        """
        current = getattr(self._active, "session", None)
        if current is not None:
            yield current
            return
        with self._begin(read_only or single_write) as conn:
            session = StoreSession(conn, self.backend)
            session.receipts_folded = self._receipts_folded
            self._active.session = session
            try:
                yield session
                session.publish_memory_revisions()
            finally:
                self._active.session = None

    def state_version(self) -> int | None:
        """A number that stays the same while nothing but appends to the operations log and the
        receipt projections has changed the store, or None where that cannot be known in this
        process (a PostgreSQL store has other writers); see ``DuckDBStore.state_version``."""
        return None

    def migrate(self) -> list[int]:
        """Apply missing migrations in order; return the versions applied now."""
        applied_now: list[int] = []
        with self.transaction() as tx:
            tx.lock(MIGRATION_LOCK_KEY)
            tx.conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, checksum TEXT NOT NULL, applied_us BIGINT NOT NULL)"
            )
            recorded = {int(v): c for v, c in tx.conn.fetchall("SELECT version, checksum FROM schema_migrations")}
            for migration in MIGRATIONS:
                if migration.version in recorded:
                    if recorded[migration.version] != migration.checksum:
                        raise StoreUnavailable(
                            f"schema migration {migration.version} recorded in this store differs from "
                            "this code's; the store was created by another PRME build"
                        )
                    continue
                if migration.only in (None, self.backend):
                    tx.conn.execute(migration_sql(migration, self.backend))
                if self.backend == "postgresql" and migration.postgresql_extra:
                    tx.conn.execute(migration.postgresql_extra)
                tx.conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum, applied_us) VALUES (?, ?, ?, ?)",
                    [migration.version, migration.name, migration.checksum, to_epoch_us(utc_now())],
                )
                applied_now.append(migration.version)
            # every migration of this code is applied now, so the fold is exactly where this code has it
            self._receipts_folded = any(
                m.version == RECEIPTS_PACKED_VERSION and m.only == self.backend for m in MIGRATIONS
            )
            newer = [v for v in recorded if v > MIGRATIONS[-1].version]
            if newer:
                raise StoreUnavailable(
                    f"this store has schema version {max(newer)}, newer than this code "
                    f"({MIGRATIONS[-1].version}); upgrade PRME"
                )
        return applied_now

    def applied_migrations(self) -> list[AppliedMigration]:
        with self.transaction() as tx:
            rows = tx.conn.fetchall(
                "SELECT version, name, checksum, applied_us FROM schema_migrations ORDER BY version"
            )
        return [AppliedMigration(int(v), n, c, from_epoch_us(a)) for v, n, c, a in rows]

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError
