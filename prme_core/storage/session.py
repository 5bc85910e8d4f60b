"""The data operations of a store, run inside one transaction (shared by both backends).

A ``StoreSession`` is what ``Store.transaction()`` yields. Its SQL is written once with ``?``
placeholders; the backend's connection adapter translates them and supplies bulk insert and
per-key locking, which are the only things the two dialects do differently.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol
from uuid import UUID

import numpy as np
import pyarrow as pa

from prme_core.canonical import canonical_json, parse_json
from prme_core.errors import AmbiguousRecord, CorruptRecord, IdempotencyConflict, InvalidInput
from prme_core.memory.models import Edge, MemoryNode
from prme_core.storage.records import OperationDraft, StoredOperation
from prme_core.types import from_epoch_us, to_epoch_us, utc_now

NODE_COLUMNS = (
    "owner",
    "id",
    "version",
    "scope",
    "node_type",
    "content",
    "content_hash",
    "session_id",
    "event_us",
    "created_us",
    "updated_us",
    "valid_from_us",
    "valid_to_us",
    "salience",
    "confidence",
    "epistemic_type",
    "lifecycle",
    "metadata",
    "superseded_by",
)
EDGE_COLUMNS = ("owner", "id", "source_id", "target_id", "edge_type", "weight", "created_us", "metadata")
OPERATION_COLUMNS = ("seq", "id", "owner", "op_type", "scope_key", "target_id", "payload", "checksum", "admitted_us")
_NODE_SELECT = ", ".join(NODE_COLUMNS)
_OP_SELECT = ", ".join(OPERATION_COLUMNS)
IN_BATCH = 500


class Connection(Protocol):
    """What a backend supplies to a session: SQL execution, bulk insert and key locks."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...
    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...
    def bulk_insert(self, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> None: ...
    def lock_key(self, key: str) -> None: ...
    def sha256_sql(self, column: str) -> str | None: ...
    def id_filter(self, column: str, ids: Sequence[str]) -> Any: ...
    def stream_arrow(self, sql: str, params: Sequence[Any] = (), batch_rows: int = 4096) -> Iterable[Any]: ...

    id_batch: int | None

    def fetch_arrow(self, sql: str, params: Sequence[Any] = ()) -> Any: ...


def node_row(node: MemoryNode) -> tuple:
    return (
        node.owner,
        str(node.id),
        node.version,
        node.scope,
        node.node_type.value,
        node.content,
        node.content_hash,
        node.session_id,
        to_epoch_us(node.event_time),
        to_epoch_us(node.created_at),
        to_epoch_us(node.updated_at),
        to_epoch_us(node.valid_from),
        to_epoch_us(node.valid_to),
        float(node.salience),
        float(node.confidence),
        node.epistemic_type.value,
        node.lifecycle.value,
        canonical_json(node.metadata).decode("utf-8"),
        str(node.superseded_by) if node.superseded_by else None,
    )


def row_node(row: Sequence[Any]) -> MemoryNode:
    (
        owner,
        id_,
        version,
        scope,
        node_type,
        content,
        content_hash,
        session_id,
        event_us,
        created_us,
        updated_us,
        valid_from_us,
        valid_to_us,
        salience,
        confidence,
        epistemic,
        lifecycle,
        metadata,
        superseded_by,
    ) = row
    try:
        return MemoryNode(
            id=id_,
            owner=owner,
            version=version,
            scope=scope,
            node_type=node_type,
            content=content,
            content_hash=content_hash,
            session_id=session_id,
            event_time=from_epoch_us(event_us),
            created_at=from_epoch_us(created_us),
            updated_at=from_epoch_us(updated_us),
            valid_from=from_epoch_us(valid_from_us),
            valid_to=from_epoch_us(valid_to_us),
            salience=salience,
            confidence=confidence,
            epistemic_type=epistemic,
            lifecycle=lifecycle,
            metadata=parse_json(metadata),
            superseded_by=superseded_by,
        )
    except ValueError as exc:
        raise CorruptRecord(f"stored node {id_} v{version} fails validation ({exc}); restore it from a backup") from exc


def edge_row(edge: Edge) -> tuple:
    return (
        edge.owner,
        str(edge.id),
        str(edge.source_id),
        str(edge.target_id),
        edge.edge_type.value,
        float(edge.weight),
        to_epoch_us(edge.created_at),
        canonical_json(edge.metadata).decode("utf-8"),
    )


def row_edge(row: Sequence[Any]) -> Edge:
    owner, id_, source, target, edge_type, weight, created_us, metadata = row
    return Edge(
        id=id_,
        owner=owner,
        source_id=source,
        target_id=target,
        edge_type=edge_type,
        weight=weight,
        created_at=from_epoch_us(created_us),
        metadata=parse_json(metadata),
    )


def _operation_values(draft: OperationDraft, admitted_us: int | None = None) -> tuple:
    """A draft's column values in ``OPERATION_COLUMNS`` order after ``seq``, admitted now unless
    given (so ``row_operation((seq, *values))`` is the stored row)."""
    admitted = to_epoch_us(utc_now()) if admitted_us is None else admitted_us
    return (
        draft.id,
        draft.owner,
        draft.op_type,
        draft.scope_key,
        draft.target_id,
        draft.payload.decode("utf-8"),
        draft.checksum,
        admitted,
    )


def row_operation(row: Sequence[Any]) -> StoredOperation:
    seq, id_, owner, op_type, scope_key, target_id, payload, checksum, admitted_us = row
    return StoredOperation(
        seq=int(seq),
        id=id_,
        owner=owner,
        op_type=op_type,
        scope_key=scope_key,
        target_id=target_id,
        payload=payload,
        checksum=checksum,
        admitted_at=from_epoch_us(admitted_us),
    )


_DIGEST_TAIL = 4096  # bytes of a payload searched first for the digest field (see _verify_payloads)


def _verify_payloads(payloads: Any, checksums: Any, marker: bytes) -> tuple[list[bool], list[str]]:
    """For rows of two Arrow string columns: does sha256(payload) equal the checksum, and which
    64 characters follow ``marker`` in the payload. Works on the Arrow data buffer directly (no
    Python string per payload) and hashes in two threads (hashlib releases the GIL)."""
    arr = payloads.combine_chunks() if hasattr(payloads, "combine_chunks") else payloads
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=width)[arr.offset : arr.offset + len(arr) + 1].tolist()
    view = memoryview(arr.buffers()[2]) if len(arr) else memoryview(b"")  # no copy of the payloads
    expected = checksums.to_pylist()

    def check(rows: range) -> list[bool]:
        return [hashlib.sha256(view[offsets[i] : offsets[i + 1]]).hexdigest() == expected[i] for i in rows]

    half = len(arr) // 2
    with ThreadPoolExecutor(max_workers=2) as pool:
        parts = list(pool.map(check, (range(0, half), range(half, len(arr)))))
    digests = []
    for i in range(len(arr)):
        # The marker's key sorts late in a canonical receipt (after the bulky candidates), and
        # no later field can contain it unescaped, so the last occurrence is the field. Look in
        # the payload's tail first; only when it is not there, in the whole payload (an
        # occurrence found in the tail is later than any that starts before it).
        lo, hi = offsets[i], offsets[i + 1]
        tail_start = max(lo, hi - _DIGEST_TAIL)
        at = bytes(view[tail_start:hi]).rfind(marker)
        if at >= 0:
            at += tail_start
        elif tail_start > lo:
            at = bytes(view[lo:hi]).rfind(marker)
            at = at + lo if at >= 0 else -1
        digests.append(bytes(view[at + len(marker) : at + len(marker) + 64]).decode() if at >= 0 else "")
    return parts[0] + parts[1], digests


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def _chunks(values: Sequence[Any], size: int = IN_BATCH) -> Iterable[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class StoreSession:
    """Data operations inside one transaction. Every read takes the owner."""

    def __init__(self, conn: Connection, backend: str) -> None:
        self.conn = conn
        self.backend = backend
        self._memory_written: set[str] = set()  # owners whose revision this transaction bumps

    # --- memory nodes -------------------------------------------------------------------

    def existing_node_ids(self, owner: str, ids: Sequence[UUID | str]) -> set[str]:
        found: set[str] = set()
        keys = [str(i) for i in ids]
        for chunk in _chunks(keys):
            rows = self.conn.fetchall(
                f"SELECT id FROM memory_nodes WHERE owner = ? AND id IN ({_placeholders(len(chunk))})",
                [owner, *chunk],
            )
            found.update(r[0] for r in rows)
        return found

    def insert_nodes(
        self, nodes: Sequence[MemoryNode], edges: Sequence[Edge] = (), *, caller_ids: Sequence[UUID] | None = None
    ) -> None:
        """Insert first versions of new nodes (and edges) atomically; ids must be new.

        ``caller_ids`` are the ids a caller chose; only those can collide with stored nodes
        (fresh UUID4s cannot), so only those are looked up. ``None`` checks every node.
        """
        if not nodes and not edges:
            return
        for node in nodes:
            if node.version != 1:
                raise InvalidInput("version", "new nodes start at version 1")
        owners = {n.owner for n in nodes}
        to_check = [n.id for n in nodes] if caller_ids is None else list(caller_ids)
        for owner in owners:
            clash = self.existing_node_ids(owner, to_check) if to_check else set()
            if clash:
                raise IdempotencyConflict(
                    f"node id {sorted(clash)[0]} already exists for this owner; "
                    "omit id to get a fresh one, or supersede the existing node"
                )
        rows = [node_row(n) for n in nodes]
        self.conn.bulk_insert("memory_nodes", NODE_COLUMNS, rows)
        self.conn.bulk_insert("memory_node_versions", NODE_COLUMNS, rows)
        self._memory_written.update(owners)
        self.insert_edges(edges)

    def write_versions(self, versions: Sequence[MemoryNode]) -> None:
        """Append new versions of existing nodes; each must follow the current version."""
        for node in versions:
            current = self.conn.fetchall(
                "SELECT version FROM memory_nodes WHERE owner = ? AND id = ?", [node.owner, str(node.id)]
            )
            if not current:
                raise InvalidInput("node_id", f"{node.id} does not exist for this owner")
            if current[0][0] != node.version - 1:
                raise IdempotencyConflict(
                    f"node {node.id} is at version {current[0][0]}, not {node.version - 1}; "
                    "it changed concurrently: re-read it and retry"
                )
            row = node_row(node)
            assignments = ", ".join(f"{c} = ?" for c in NODE_COLUMNS[2:])
            self.conn.execute(
                f"UPDATE memory_nodes SET {assignments} WHERE owner = ? AND id = ?",
                [*row[2:], node.owner, str(node.id)],
            )
            self.conn.bulk_insert("memory_node_versions", NODE_COLUMNS, [row])
            self._memory_written.add(node.owner)

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        if edges:
            self.conn.bulk_insert("memory_edges", EDGE_COLUMNS, [edge_row(e) for e in edges])
            self._memory_written.update(e.owner for e in edges)

    def get_node(self, owner: str, node_id: UUID | str) -> MemoryNode | None:
        rows = self.conn.fetchall(
            f"SELECT {_NODE_SELECT} FROM memory_nodes WHERE owner = ? AND id = ?", [owner, str(node_id)]
        )
        return row_node(rows[0]) if rows else None

    def get_nodes(self, owner: str, node_ids: Sequence[UUID | str]) -> dict[str, MemoryNode]:
        found: dict[str, MemoryNode] = {}
        keys = sorted({str(i) for i in node_ids})
        for chunk in _chunks(keys):
            rows = self.conn.fetchall(
                f"SELECT {_NODE_SELECT} FROM memory_nodes WHERE owner = ? AND id IN ({_placeholders(len(chunk))})",
                [owner, *chunk],
            )
            for row in rows:
                found[row[1]] = row_node(row)
        return found

    def node_history(self, owner: str, node_id: UUID | str) -> list[MemoryNode]:
        rows = self.conn.fetchall(
            f"SELECT {_NODE_SELECT} FROM memory_node_versions WHERE owner = ? AND id = ? ORDER BY version",
            [owner, str(node_id)],
        )
        return [row_node(r) for r in rows]

    def scan_nodes(
        self, owner: str, *, scopes: Sequence[str] | None, lifecycles: Sequence[str] | None, after_seq: int, limit: int
    ) -> list[tuple[int, MemoryNode]]:
        sql = f"SELECT seq, {_NODE_SELECT} FROM memory_nodes WHERE owner = ? AND seq > ?"
        params: list[Any] = [owner, after_seq]
        if scopes is not None:
            sql += f" AND scope IN ({_placeholders(len(scopes))})"
            params.extend(scopes)
        if lifecycles is not None:
            sql += f" AND lifecycle IN ({_placeholders(len(lifecycles))})"
            params.extend(lifecycles)
        sql += " ORDER BY seq LIMIT ?"
        params.append(limit)
        return [(int(r[0]), row_node(r[1:])) for r in self.conn.fetchall(sql, params)]

    def edges_of(self, owner: str, node_id: UUID | str) -> list[Edge]:
        key = str(node_id)
        rows = self.conn.fetchall(
            f"SELECT {', '.join(EDGE_COLUMNS)} FROM memory_edges WHERE owner = ? AND (source_id = ? OR target_id = ?) ORDER BY seq",
            [owner, key, key],
        )
        return [row_edge(r) for r in rows]

    def active_node_table(self, owner: str) -> Any:
        """The owner's active nodes (tentative or stable) as an Arrow table, in insertion order."""
        return self.conn.fetch_arrow(
            "SELECT seq, id, scope, node_type, content, content_hash, session_id, event_us, created_us, "
            "updated_us, valid_from_us, valid_to_us, salience, confidence, epistemic_type, metadata "
            "FROM memory_nodes WHERE owner = ? AND lifecycle IN ('tentative', 'stable') ORDER BY seq",
            [owner],
        )

    def edge_list(self, owner: str) -> list[tuple[str, str, str, float]]:
        """(source, target, type, weight) of every edge of the owner, in creation order."""
        return [
            tuple(r)
            for r in self.conn.fetchall(
                "SELECT source_id, target_id, edge_type, weight FROM memory_edges WHERE owner = ? ORDER BY seq", [owner]
            )
        ]

    def memory_revision(self, owner: str) -> int:
        """The owner's memory revision: it changes whenever a write to the owner's memory
        becomes visible, so a corpus cached at one revision is current while it reads the same.

        Every transaction that writes memory bumps one row per owner as its last statement
        (``publish_memory_revisions``). Sequence numbers could not serve: a transaction draws
        them when it inserts, not when it commits, so a slow writer's lower number committing
        after a faster writer's higher one left the newest number unchanged. The bump holds the
        row lock until commit, so the next writer increments only the committed value (READ
        COMMITTED re-reads it after the wait): the value grows in commit order, and a writer
        whose commit a read of value v did not see leaves the row above v. Read the revision
        before the rows it describes (a corpus may then hold more than its revision says, never
        less). No row reads as 0.
        """
        rows = self.conn.fetchall("SELECT revision FROM memory_revisions WHERE owner = ?", [owner])
        return int(rows[0][0]) if rows else 0

    def publish_memory_revisions(self) -> None:
        """Bump the revision of every owner this transaction wrote memory for; run last, right
        before COMMIT, so the row lock is held briefly and after every other lock the
        transaction takes (owners in sorted order: no two writers wait on each other)."""
        for owner in sorted(self._memory_written):
            self.conn.execute(
                "INSERT INTO memory_revisions (owner, revision) VALUES (?, 1) "
                "ON CONFLICT (owner) DO UPDATE SET revision = memory_revisions.revision + 1",
                [owner],
            )
        self._memory_written.clear()

    # --- operations log -----------------------------------------------------------------

    def append_operation(self, draft: OperationDraft) -> tuple[StoredOperation, bool]:
        """Append unless the id exists; return the stored row and whether this call wrote it."""
        values = _operation_values(draft)
        returned = self.conn.fetchall(
            "INSERT INTO operations (id, owner, op_type, scope_key, target_id, payload, checksum, admitted_us) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING seq",
            list(values),
        )
        if returned:
            return row_operation((returned[0][0], *values)), True
        existing = self._operation_by_id(draft.id)
        if existing is None:  # pragma: no cover - a conflicting row exists by definition
            raise CorruptRecord(f"operation {draft.id} conflicted but cannot be read back")
        return existing, False

    def insert_new_operation(self, draft: OperationDraft) -> StoredOperation:
        """Append an operation whose id is known to be new (no conflict clause: the cheapest
        insert). A duplicate id raises ``DuplicateKey`` and the transaction must end."""
        values = _operation_values(draft)
        seq = self.conn.fetchall(
            "INSERT INTO operations (id, owner, op_type, scope_key, target_id, payload, checksum, admitted_us) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
            list(values),
        )[0][0]
        return row_operation((seq, *values))

    def _operation_by_id(self, op_id: str) -> StoredOperation | None:
        rows = self.conn.fetchall(f"SELECT {_OP_SELECT} FROM operations WHERE id = ?", [op_id])
        return row_operation(rows[0]) if rows else None

    def get_operation(self, owner: str, op_id: str) -> StoredOperation | None:
        rows = self.conn.fetchall(f"SELECT {_OP_SELECT} FROM operations WHERE id = ? AND owner = ?", [op_id, owner])
        return row_operation(rows[0]).verified(owner) if rows else None

    def find_operation(self, owner: str, op_type: str, target_id: str) -> StoredOperation | None:
        """The one operation of a type for a target; two such rows are an integrity error."""
        rows = self.conn.fetchall(
            f"SELECT {_OP_SELECT} FROM operations WHERE owner = ? AND op_type = ? AND target_id = ? LIMIT 2",
            [owner, op_type, target_id],
        )
        if len(rows) > 1:
            raise AmbiguousRecord(f"two {op_type} operations claim target {target_id}; the store needs repair")
        return row_operation(rows[0]).verified(owner) if rows else None

    def find_operations(self, owner: str, op_type: str, target_ids: Sequence[str]) -> dict[str, StoredOperation]:
        """Operations of a type by target id, in batches; duplicates are an integrity error."""
        found: dict[str, StoredOperation] = {}
        keys = sorted(set(target_ids))
        for chunk in _chunks(keys):
            rows = self.conn.fetchall(
                f"SELECT {_OP_SELECT} FROM operations WHERE owner = ? AND op_type = ? "
                f"AND target_id IN ({_placeholders(len(chunk))})",
                [owner, op_type, *chunk],
            )
            for row in rows:
                op = row_operation(row).verified(owner)
                if op.target_id in found:
                    raise AmbiguousRecord(
                        f"two {op_type} operations claim target {op.target_id}; the store needs repair"
                    )
                found[op.target_id] = op
        return found

    def list_operations(
        self,
        owner: str,
        op_type: str,
        *,
        scope_key: str | None = None,
        after_target: str | None = None,
        limit: int = 100,
        order: str = "target",
        newest_first: bool = False,
    ) -> list[StoredOperation]:
        """A bounded page of an owner's operations of one type, ordered by target id or seq."""
        sql = f"SELECT {_OP_SELECT} FROM operations WHERE owner = ? AND op_type = ?"
        params: list[Any] = [owner, op_type]
        if scope_key is not None:
            sql += " AND scope_key = ?"
            params.append(scope_key)
        if after_target is not None:
            sql += " AND target_id > ?"
            params.append(after_target)
        if order == "target":
            sql += " ORDER BY target_id"
        else:
            sql += " ORDER BY seq DESC" if newest_first else " ORDER BY seq"
        sql += " LIMIT ?"
        params.append(limit)
        return [row_operation(r).verified(owner) for r in self.conn.fetchall(sql, params)]

    def operations_in_admission_order(self, owner: str, op_type: str, limit: int) -> list[StoredOperation]:
        """Up to ``limit`` of the owner's operations of one type, oldest admission first (the
        rows are not verified here: callers verify each one they use)."""
        rows = self.conn.fetchall(
            f"SELECT {_OP_SELECT} FROM operations WHERE owner = ? AND op_type = ? ORDER BY seq LIMIT ?",
            [owner, op_type, limit],
        )
        return [row_operation(r) for r in rows]

    def _id_batches(self, ids: Sequence[str]) -> Iterable[Sequence[str]]:
        keys = sorted(set(ids))
        size = self.conn.id_batch
        return [keys] if size is None else list(_chunks(keys, size))

    def operation_integrity(
        self, owner: str, op_type: str, target_ids: Sequence[str], digest_field: str
    ) -> list[tuple[str, str, bool, str]]:
        """(target id, checksum, payload still hashes to checksum, value of a top-level digest
        field) per operation. Where the backend hashes fast, no payload leaves the database;
        otherwise payloads stream back in batches and are hashed from the Arrow buffers."""
        found: list[tuple[str, str, bool, str]] = []
        marker = f'"{digest_field}":"'
        hash_sql = self.conn.sha256_sql("payload")
        for chunk in self._id_batches(target_ids):
            with self.conn.id_filter("target_id", chunk) as (where, extra):
                if hash_sql is not None:
                    digest_sql = f"substr(payload, strpos(payload, ?) + {len(marker)}, 64)"
                    found.extend(
                        tuple(r)
                        for r in self.conn.fetchall(
                            f"SELECT target_id, checksum, {hash_sql} = checksum, {digest_sql} FROM operations "
                            f"WHERE owner = ? AND op_type = ? AND {where}",
                            [marker, owner, op_type, *extra],
                        )
                    )
                    continue
                for batch in self.conn.stream_arrow(
                    f"SELECT target_id, checksum, payload FROM operations WHERE owner = ? AND op_type = ? AND {where}",
                    [owner, op_type, *extra],
                ):
                    intact, digests = _verify_payloads(
                        batch.column("payload"), batch.column("checksum"), marker.encode()
                    )
                    found.extend(
                        zip(
                            batch.column("target_id").to_pylist(), batch.column("checksum").to_pylist(), intact, digests
                        )
                    )
        return found

    def receipt_projection_rows(self, owner: str, request_ids: Sequence[str]) -> Iterable[tuple]:
        """Packed projection rows of receipts, streamed (column order: see receipts.store); the
        pool digest is '' and the pool flags 0 before version 11. The pools themselves are read by
        ``receipt_pool_rows``."""
        for chunk in self._id_batches(request_ids):
            with self.conn.id_filter("request_id", chunk) as (where, extra):
                for batch in self.conn.stream_arrow(
                    "SELECT request_id, receipt_checksum, schema_version, scope_key, query, ranking_policy, fusion, "
                    "candidate_count, int_columns, float_columns, node_ids, base_node_ids, adjustments, "
                    "coalesce(pool_sha256, '') AS pool_sha256, coalesce(pool_flags, 0) AS pool_flags "
                    f"FROM receipt_projections WHERE owner = ? AND {where}",
                    [owner, *extra],
                ):
                    yield from zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)))

    def receipt_pool_rows(self, owner: str, request_ids: Sequence[str]) -> Iterable[tuple[str, str, str, bytes]]:
        """(request id, receipt checksum, pool digest, packed pool) of version-11 receipts, streamed;
        receipts without a packed pool are absent."""
        for chunk in self._id_batches(request_ids):
            with self.conn.id_filter("request_id", chunk) as (where, extra):
                for batch in self.conn.stream_arrow(
                    "SELECT request_id, receipt_checksum, pool_sha256, pool FROM receipt_projections "
                    f"WHERE owner = ? AND pool IS NOT NULL AND {where}",
                    [owner, *extra],
                ):
                    yield from zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)))

    def latest_operation(self, owner: str, op_type: str, target_id: str) -> StoredOperation | None:
        """The newest verified operation of a type for a target (for append-only version chains)."""
        rows = self.conn.fetchall(
            f"SELECT {_OP_SELECT} FROM operations WHERE owner = ? AND op_type = ? AND target_id = ? "
            "ORDER BY seq DESC LIMIT 1",
            [owner, op_type, target_id],
        )
        return row_operation(rows[0]).verified(owner) if rows else None

    def operation_fingerprint(self, owner: str, op_type: str) -> tuple[int, int]:
        """(count, newest seq) of an owner's operations of one type: changes when one is added."""
        row = self.conn.fetchall(
            "SELECT count(*), coalesce(max(seq), 0) FROM operations WHERE owner = ? AND op_type = ?", [owner, op_type]
        )[0]
        return int(row[0]), int(row[1])

    def scope_sets_since(self, op_type: str, after_seq: int, limit: int) -> list[tuple[str, str, int]]:
        """(owner, scope key, newest seq) of operations of a type admitted after ``after_seq``,
        across owners (for discovering new learning targets), oldest first, bounded."""
        rows = self.conn.fetchall(
            "SELECT owner, scope_key, max(seq) AS newest FROM operations WHERE op_type = ? AND seq > ? "
            "AND scope_key IS NOT NULL GROUP BY owner, scope_key ORDER BY newest LIMIT ?",
            [op_type, after_seq, limit],
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    def operation_at(self, op_id: str, seq: int) -> StoredOperation | None:
        """The operation with this id, unverified, if it sits at this log position (None
        otherwise). Looked up by id alone: a second predicate on the position made DuckDB read
        the row group's payloads (3.2 ms against 0.55 ms with ~20k operations)."""
        rows = self.conn.fetchall(f"SELECT {_OP_SELECT} FROM operations WHERE id = ?", [op_id])
        op = row_operation(rows[0]) if rows else None
        return op if op is not None and op.seq == seq else None

    # --- records found without their owner (API keys: the key names the owner, not the reverse)

    def operations_by_id(self, op_ids: Sequence[str]) -> list[StoredOperation]:
        """Operations by id whatever their owner, unverified: the caller verifies each against
        the owner its record names."""
        rows = self.conn.fetchall(
            f"SELECT {_OP_SELECT} FROM operations WHERE id IN ({_placeholders(len(op_ids))})", list(op_ids)
        )
        return [row_operation(r) for r in rows]

    def operations_of_type(self, op_type: str, *, after_seq: int, limit: int) -> list[StoredOperation]:
        """Up to ``limit`` operations of one type across owners, oldest first after ``after_seq``
        (operator listings), unverified."""
        rows = self.conn.fetchall(
            f"SELECT {_OP_SELECT} FROM operations WHERE op_type = ? AND seq > ? ORDER BY seq LIMIT ?",
            [op_type, after_seq, limit],
        )
        return [row_operation(r) for r in rows]

    # --- ranking pointer heads (a derived index over the pointer changes in the log) -----

    def pointer_position(self, owner: str, scope_key: str) -> tuple[tuple[str, int | None] | None, int | None]:
        """In one statement: (operation id, log seq) named by the head row of (owner, scope key),
        and the log seq of the newest entry of the append-only change index; None where there is
        no such row."""
        rows = self.conn.fetchall(
            "SELECT 0, op_id, op_seq FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ? UNION ALL "
            "SELECT 1, NULL, max(seq) FROM ranking_pointer_changes WHERE owner = ? AND scope_key = ?",
            [owner, scope_key, owner, scope_key],
        )
        head, newest = None, None
        for kind, op_id, seq in rows:
            if int(kind) == 0:
                head = (op_id, None if seq is None else int(seq))
            elif seq is not None:
                newest = int(seq)
        return head, newest

    def write_pointer_head(self, owner: str, scope_key: str, op: StoredOperation) -> None:
        """Point the head row of (owner, scope key) at a stored pointer change."""
        self.conn.execute(
            "INSERT INTO ranking_pointer_heads (owner, scope_key, op_id, op_seq, payload, checksum) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (owner, scope_key) DO UPDATE SET op_id = excluded.op_id, "
            "op_seq = excluded.op_seq, payload = excluded.payload, checksum = excluded.checksum",
            [owner, scope_key, op.id, op.seq, op.payload, op.checksum],
        )

    def delete_pointer_head(self, owner: str, scope_key: str) -> None:
        self.conn.execute("DELETE FROM ranking_pointer_heads WHERE owner = ? AND scope_key = ?", [owner, scope_key])

    def index_pointer_change(self, op: StoredOperation) -> None:
        """Add a stored pointer change to the append-only change index (same transaction)."""
        self.conn.execute(
            "INSERT INTO ranking_pointer_changes (owner, scope_key, seq, op_id) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [op.owner, op.scope_key, op.seq, op.id],
        )

    def lock(self, key: str) -> None:
        """Serialize writers of one logical key until this transaction ends."""
        self.conn.lock_key(key)

    # --- SQL for other packages: bulk receipts (receipts.store) and the rows the memory-artifact
    # digest covers (learning.holdout). They own what the rows mean; the statements live here.

    def insert_new_operations(self, drafts: Sequence[OperationDraft]) -> None:
        """Append operations whose ids are all known to be new in bounded multi-row statements
        (no conflict clause and no seq read back: the cheapest bulk append). A duplicate id
        raises ``DuplicateKey`` and the transaction must end."""
        admitted = to_epoch_us(utc_now())
        self.conn.bulk_insert(
            "operations",
            NEW_OPERATION_COLUMNS,
            [_operation_values(d, admitted) for d in drafts],
        )

    def insert_receipt_projections(self, rows: Sequence[tuple]) -> None:
        """Packed candidate projections of receipts: one row per receipt, in ``PROJECTION_COLUMNS``
        order (``receipts.store`` builds them)."""
        self.conn.bulk_insert("receipt_projections", PROJECTION_COLUMNS, rows)

    def node_version_rows(self, owner: str, *, after: tuple[str, int] | None, limit: int) -> list[tuple]:
        """Up to ``limit`` of the owner's node versions after (id, version) ``after``, in (id,
        version) order, as ``ARTIFACT_NODE_COLUMNS`` tuples."""
        nodes = f"SELECT {', '.join(ARTIFACT_NODE_COLUMNS)} FROM memory_node_versions WHERE owner = ?"
        where = " AND (id > ? OR (id = ? AND version > ?))" if after else ""
        params = [owner, after[0], after[0], after[1]] if after else [owner]
        return self.conn.fetchall(f"{nodes}{where} ORDER BY id, version LIMIT ?", [*params, limit])

    def edge_rows(self, owner: str, *, after: str | None, limit: int) -> list[tuple]:
        """Up to ``limit`` of the owner's edges with id after ``after``, in id order, as
        ``ARTIFACT_EDGE_COLUMNS`` tuples."""
        edges = f"SELECT {', '.join(ARTIFACT_EDGE_COLUMNS)} FROM memory_edges WHERE owner = ?"
        return self.conn.fetchall(
            f"{edges}{'' if after is None else ' AND id > ?'} ORDER BY id LIMIT ?",
            [owner, *([] if after is None else [after]), limit],
        )


# Row layouts of the section above.
NEW_OPERATION_COLUMNS = OPERATION_COLUMNS[1:]  # every column but seq, which the database assigns
PROJECTION_HEADER_COLUMNS = ("schema_version", "scope_key", "query", "ranking_policy", "fusion", "candidate_count")
PROJECTION_COLUMNS = (
    "owner",
    "request_id",
    "receipt_checksum",
    *PROJECTION_HEADER_COLUMNS,
    "int_columns",
    "float_columns",
    "node_ids",
    "base_node_ids",
    "adjustments",
    "pool_sha256",
    "pool_flags",
    "pool",
)
ARTIFACT_NODE_COLUMNS = tuple(c for c in NODE_COLUMNS if c not in ("owner", "content"))
"""Every stored column of a node version but the owner (the digest names it once) and the content
(its hash stands for it)."""
ARTIFACT_EDGE_COLUMNS = tuple(c for c in EDGE_COLUMNS if c != "owner")
