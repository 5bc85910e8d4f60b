"""Memory nodes and edges in a store session: row mapping and every node and edge statement."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any
from uuid import UUID
from weakref import WeakKeyDictionary

from prme_core.canonical import canonical_json, parse_json
from prme_core.errors import CorruptRecord, IdempotencyConflict, InvalidInput
from prme_core.memory.models import Edge, MemoryNode
from prme_core.storage.sql import (
    _NODE_SELECT,
    ARTIFACT_EDGE_COLUMNS,
    ARTIFACT_NODE_COLUMNS,
    EDGE_COLUMNS,
    NODE_COLUMNS,
    SessionBase,
    _chunks,
    _placeholders,
)
from prme_core.types import from_epoch_us, to_epoch_us


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


class _KnownRefs:
    """Node references a connection has read, per owner, with the owner's forget count at the
    time (a forgotten owner's references are gone; ids stored again get new ones)."""

    MAX_OWNERS = 64
    MAX_REFS = 1_000_000

    def __init__(self) -> None:
        self._owners: OrderedDict[str, tuple[int, dict[str, int]]] = OrderedDict()

    def of(self, owner: str, epoch: int | None = None) -> dict[str, int]:
        """The owner's known references (at ``epoch``: dropped first if they were read at another)."""
        held = self._owners.get(owner)
        if epoch is None:
            return held[1] if held else {}
        if held is None or held[0] != epoch:
            held = self._owners[owner] = (epoch, {})
        self._owners.move_to_end(owner)
        return held[1]

    def trim(self) -> None:
        while len(self._owners) > self.MAX_OWNERS or sum(len(m) for _, m in self._owners.values()) > self.MAX_REFS:
            self._owners.popitem(last=False)


class _KnownRefsByConnection:
    """One ``_KnownRefs`` per raw database connection (a pooled PostgreSQL connection, or a DuckDB
    store's), dropped with it: a connection always reaches the same database."""

    def __init__(self) -> None:
        self._by_raw: WeakKeyDictionary[Any, _KnownRefs] = WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, conn: Any) -> _KnownRefs | None:
        raw = getattr(conn, "raw", None)
        if raw is None:
            return None
        with self._lock:
            known = self._by_raw.get(raw)
            if known is None:
                known = self._by_raw[raw] = _KnownRefs()
            return known


_KNOWN_REFS = _KnownRefsByConnection()


class NodeRows(SessionBase):
    """Memory node versions and edges, read and written through the owner."""

    def existing_node_ids(self, owner: str, ids: Sequence[UUID | str], scopes: Sequence[str] | None = None) -> set[str]:
        """Which of ``ids`` are the owner's memories (in one of ``scopes``, when given)."""
        found: set[str] = set()
        keys = [str(i) for i in ids]
        within = "" if scopes is None else f" AND scope IN ({_placeholders(len(scopes))})"
        for chunk in _chunks(keys):
            rows = self.conn.fetchall(
                f"SELECT id FROM memory_nodes WHERE owner = ? AND id IN ({_placeholders(len(chunk))}){within}",
                [owner, *chunk, *(scopes or ())],
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
        self._reference_new_nodes(owners, [r[:2] for r in rows], to_check)
        self._memory_written.update(owners)
        self.insert_edges(edges)

    def _reference_new_nodes(self, owners: set[str], keys: list[tuple], to_check: Sequence[UUID | str]) -> None:
        """Give each new node (owner, id) its reference (the column's default draws it). Only the
        ids in ``to_check`` (chosen by a caller) can have one already: an id stored again after
        its memory was deleted keeps the reference it had, which stored pools may name."""
        held: set[tuple] = set()
        for owner in owners if to_check else ():
            for chunk in _chunks([str(i) for i in to_check]):
                rows = self.conn.fetchall(
                    f"SELECT id FROM node_refs WHERE owner = ? AND id IN ({_placeholders(len(chunk))})",
                    [owner, *chunk],
                )
                held.update((owner, r[0]) for r in rows)
        self.conn.bulk_insert("node_refs", ("owner", "id"), [k for k in keys if k not in held])

    # --- node references: the integer a stored pool or projection names a node by -------------

    def node_refs(self, owner: str, ids: Collection[str]) -> dict[str, int]:
        """The owner's reference of each of ``ids`` that has one (every memory stored since
        migration 10, and every one stored before that was not deleted first).

        A reference never changes and only forgetting its owner removes it, so references read
        before are kept per connection (``_KnownRefs``) while the number of times the owner was
        forgotten reads the same; only ids not seen before are looked up. References this
        transaction may have written itself (it stored memories of the owner) are not kept: it
        may still roll back."""
        keys = set(ids)
        if not keys:
            return {}
        known = _KNOWN_REFS.get(self.conn)
        before = known.of(owner) if known is not None else {}
        skipped = keys & before.keys()
        epoch, found = self._look_up_refs(owner, keys - skipped)
        if known is None:
            return found
        cached = known.of(owner, epoch)
        if skipped and cached is not before:  # forgotten since they were read: read them again
            found.update(self._look_up_refs(owner, skipped)[1])
        else:
            found.update((k, cached[k]) for k in skipped)
        if owner not in self._memory_written:
            cached.update(found)
            known.trim()
        return found

    def _look_up_refs(self, owner: str, keys: Collection[str]) -> tuple[int, dict[str, int]]:
        """(how many times the owner was forgotten, the references of ``keys``), in one query."""
        epoch = "SELECT NULL, count(*) FROM deletions WHERE owner = ? AND kind = 'owner'"
        if not keys:
            ((_, count),) = self.conn.fetchall(epoch, [owner])
            return int(count), {}
        if self.backend == "postgresql":  # one text parameter: adapting a list costs more than the lookup
            rows = self.conn.fetchall(
                f"{epoch} UNION ALL SELECT id, ref FROM node_refs WHERE owner = ? AND id = ANY(string_to_array(?, ','))",
                [owner, owner, ",".join(sorted(keys))],
            )
        else:
            with self.conn.id_filter("id", sorted(keys)) as (where, extra):
                rows = self.conn.fetchall(
                    f"{epoch} UNION ALL SELECT id, ref FROM node_refs WHERE owner = ? AND {where}",
                    [owner, owner, *extra],
                )
        count = next(int(r) for i, r in rows if i is None)
        return count, {i: int(r) for i, r in rows if i is not None}

    def node_ids_of_refs(self, owner: str, refs: Sequence[int]) -> dict[int, str]:
        """The node id each of the owner's ``refs`` names (refs the owner does not hold are absent)."""
        keys = sorted({int(r) for r in refs})
        if not keys:
            return {}
        if self.backend == "postgresql":
            rows = self.conn.fetchall(
                "SELECT ref, id FROM node_refs WHERE owner = ? AND ref = ANY(string_to_array(?, ',')::bigint[])",
                [owner, ",".join(map(str, keys))],
            )
            return {int(r): i for r, i in rows}
        found: dict[int, str] = {}
        for chunk in _chunks(keys):
            rows = self.conn.fetchall(
                f"SELECT ref, id FROM node_refs WHERE owner = ? AND ref IN ({_placeholders(len(chunk))})",
                [owner, *chunk],
            )
            found.update((int(r), i) for r, i in rows)
        return found

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
        self,
        owner: str,
        *,
        scopes: Sequence[str] | None,
        lifecycles: Sequence[str] | None,
        after_seq: int,
        limit: int,
        node_types: Sequence[str] | None = None,
        created_from_us: int | None = None,
        created_to_us: int | None = None,
    ) -> list[tuple[int, MemoryNode]]:
        sql = f"SELECT seq, {_NODE_SELECT} FROM memory_nodes WHERE owner = ? AND seq > ?"
        params: list[Any] = [owner, after_seq]
        for column, values in (("scope", scopes), ("lifecycle", lifecycles), ("node_type", node_types)):
            if values is not None:
                sql += f" AND {column} IN ({_placeholders(len(values))})"
                params.extend(values)
        if created_from_us is not None:
            sql += " AND created_us >= ?"
            params.append(created_from_us)
        if created_to_us is not None:
            sql += " AND created_us <= ?"
            params.append(created_to_us)
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
        less). No row reads as 0, or as the revision the owner had when it was forgotten.
        """
        rows = self.conn.fetchall("SELECT revision FROM memory_revisions WHERE owner = ?", [owner])
        if rows:
            return int(rows[0][0])
        # No row: an owner never written, or one forgotten (its revision lives on in its deletion
        # record, so the next write continues above it, never back at a value a cache still holds).
        floor = self.conn.fetchall("SELECT max(revision_floor) FROM deletions WHERE owner = ?", [owner])
        return int(floor[0][0] or 0)

    def publish_memory_revisions(self) -> None:
        """Bump the revision of every owner this transaction wrote memory for; run last, right
        before COMMIT, so the row lock is held briefly and after every other lock the
        transaction takes (owners in sorted order: no two writers wait on each other)."""
        for owner in sorted(self._memory_written):
            self.conn.execute(
                "INSERT INTO memory_revisions (owner, revision) "
                "SELECT ?, coalesce(max(revision_floor), 0) + 1 FROM deletions WHERE owner = ? "
                "ON CONFLICT (owner) DO UPDATE SET revision = memory_revisions.revision + 1",
                [owner, owner],
            )
        self._memory_written.clear()

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
