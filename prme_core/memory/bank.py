"""The memory bank: store, read, scan, link, supersede and archive an owner's nodes.

Every method takes the owner and validates all input before the first write; batch writes are
one transaction, so a failure writes nothing. A change never edits a version in place: it
appends version + 1 and keeps the old one readable through ``history``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol
from uuid import UUID, uuid4

from prme_core.errors import InvalidInput, NodeNotFound
from prme_core.memory.models import (
    Edge,
    EdgeType,
    Lifecycle,
    MemoryInput,
    MemoryNode,
    Page,
    content_sha256,
)
from prme_core.storage.base import Store
from prme_core.storage.session import StoreSession
from prme_core.types import to_epoch_us, utc_now
from prme_core.validation import (
    check_aware,
    check_flag,
    check_limit,
    check_no_nul,
    check_owner,
    check_scope_set,
    parse_model,
)

MAX_BATCH_NODES = 50_000
MAX_PAGE = 1000

MemoryLike = MemoryInput | Mapping[str, Any] | str


class ScopeSettings(Protocol):
    """What the bank reads from the engine's settings (``prme_core.settings.EngineSettings``, which
    sits above memory because it also configures retrieval and the store): the configured scopes."""

    @property
    def scopes(self) -> tuple[str, ...]: ...


def parse_uuid(value: Any, field: str) -> UUID:
    """A UUID from a UUID or its string form; raise ``InvalidInput`` otherwise."""
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    raise InvalidInput(field, f"must be a UUID, got {value!r}")


class MemoryBank:
    """Owner-scoped node and edge operations over a store."""

    def __init__(self, store: Store, settings: ScopeSettings) -> None:
        self.store = store
        self.settings = settings

    # --- validation ---------------------------------------------------------------------

    def _input(self, item: MemoryLike, field: str) -> MemoryInput:
        if isinstance(item, str):
            item = {"content": item}
        parsed = parse_model(MemoryInput, item, field)
        if parsed.scope not in self.settings.scopes:
            raise InvalidInput(
                f"{field}.scope", f"unknown scope {parsed.scope!r}; configured scopes: {list(self.settings.scopes)}"
            )
        return parsed

    def check_scopes(self, scopes: Any, field: str = "scopes") -> tuple[str, ...]:
        """A non-empty, known, sorted and de-duplicated scope set."""
        return check_scope_set(scopes, allowed=self.settings.scopes, field=field)

    # --- writes -------------------------------------------------------------------------

    def store_one(self, owner: str, item: MemoryLike) -> MemoryNode:
        return self.store_batch(owner, [item])[0]

    def store_batch(self, owner: str, items: Sequence[MemoryLike]) -> list[MemoryNode]:
        """Store up to 50,000 memories in one transaction: all of them or none."""
        owner = check_owner(owner)
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise InvalidInput("items", "must be a list of memories")
        if not items:
            raise InvalidInput("items", "must hold at least one memory")
        if len(items) > MAX_BATCH_NODES:
            raise InvalidInput("items", f"holds {len(items)} memories; the bound is {MAX_BATCH_NODES} per call")
        inputs = [self._input(item, f"items[{i}]") for i, item in enumerate(items)]
        now = utc_now()
        nodes: list[MemoryNode] = []
        seen: set[UUID] = set()
        for i, inp in enumerate(inputs):
            node_id = inp.id or uuid4()
            if node_id in seen:
                raise InvalidInput(f"items[{i}].id", f"{node_id} appears twice in this batch")
            seen.add(node_id)
            nodes.append(_first_version(owner, node_id, inp, now))
        caller_ids = [inp.id for inp in inputs if inp.id is not None]
        with self.store.transaction() as tx:
            tx.insert_nodes(nodes, caller_ids=caller_ids)
        return nodes

    def link(
        self,
        owner: str,
        source_id: Any,
        target_id: Any,
        edge_type: EdgeType | str = EdgeType.RELATES_TO,
        *,
        weight: float = 1.0,
        metadata: Mapping[str, Any] | None = None,
    ) -> Edge:
        """Add a typed edge between two of the owner's nodes."""
        owner = check_owner(owner)
        source = parse_uuid(source_id, "source_id")
        target = parse_uuid(target_id, "target_id")
        check_no_nul(metadata, "metadata")  # checked here, not on Edge, so stored edges always load
        edge = parse_model(
            Edge,
            {
                "id": uuid4(),
                "owner": owner,
                "source_id": source,
                "target_id": target,
                "edge_type": edge_type,
                "weight": weight,
                "created_at": utc_now(),
                "metadata": dict(metadata or {}),
            },
            "edge",
        )
        with self.store.transaction() as tx:
            found = tx.existing_node_ids(owner, [source, target])
            for name, node_id in (("source_id", source), ("target_id", target)):
                if str(node_id) not in found:
                    raise NodeNotFound(f"{name} {node_id} is not a node of this owner")
            tx.insert_edges([edge])
        return edge

    def supersede(self, owner: str, node_id: Any, replacement: MemoryLike) -> MemoryNode:
        """Store ``replacement`` and mark the old node superseded by it, in one transaction.

        A plain string replaces only the content; scope, type, session and the rest are kept.
        """
        owner, old_id = _node_key(owner, node_id)
        with self.store.transaction() as tx:
            old = _current(tx, owner, old_id)
            if not old.is_active:
                raise InvalidInput(
                    "node_id", f"node {old_id} is {old.lifecycle.value}; only active nodes can be superseded"
                )
            if isinstance(replacement, str):
                replacement = {
                    "content": replacement,
                    "scope": old.scope,
                    "node_type": old.node_type,
                    "session_id": old.session_id,
                    "event_time": old.event_time,
                    "salience": old.salience,
                    "confidence": old.confidence,
                    "epistemic_type": old.epistemic_type,
                    "metadata": old.metadata,
                }
            inp = self._input(replacement, "replacement")
            now = utc_now()
            new = _first_version(owner, inp.id or uuid4(), inp, now)
            retired = old.model_copy(
                update={
                    "version": old.version + 1,
                    "lifecycle": Lifecycle.SUPERSEDED,
                    "superseded_by": new.id,
                    "updated_at": now,
                }
            )
            edge = Edge(
                id=uuid4(),
                owner=owner,
                source_id=new.id,
                target_id=old.id,
                edge_type=EdgeType.SUPERSEDES,
                created_at=now,
            )
            tx.insert_nodes([new], [edge], caller_ids=[inp.id] if inp.id else [])
            tx.write_versions([retired])
        return new

    def archive(self, owner: str, node_id: Any) -> MemoryNode:
        """Append an archived version of the node; earlier versions stay readable."""
        owner, key = _node_key(owner, node_id)
        with self.store.transaction() as tx:
            current = _current(tx, owner, key)
            if current.lifecycle is Lifecycle.ARCHIVED:
                raise InvalidInput("node_id", f"node {key} is already archived")
            archived = current.model_copy(
                update={
                    "version": current.version + 1,
                    "lifecycle": Lifecycle.ARCHIVED,
                    "updated_at": utc_now(),
                }
            )
            tx.write_versions([archived])
        return archived

    # --- reads --------------------------------------------------------------------------

    def get(self, owner: str, node_id: Any) -> MemoryNode:
        """The current version of a node; a missing or foreign id raises ``NodeNotFound``."""
        owner, key = _node_key(owner, node_id)
        with self.store.transaction() as tx:
            return _current(tx, owner, key)

    def history(self, owner: str, node_id: Any) -> list[MemoryNode]:
        """Every version of a node, oldest first."""
        owner, key = _node_key(owner, node_id)
        with self.store.transaction() as tx:
            versions = tx.node_history(owner, key)
        if not versions:
            raise _not_found(key)
        return versions

    def edges(self, owner: str, node_id: Any) -> list[Edge]:
        """Edges touching a node of the owner, in creation order."""
        owner, key = _node_key(owner, node_id)
        with self.store.transaction() as tx:
            if not tx.existing_node_ids(owner, [key]):
                raise _not_found(key)
            return tx.edges_of(owner, key)

    def scan(
        self,
        owner: str,
        *,
        scopes: Sequence[str] | None = None,
        include_inactive: bool = False,
        cursor: str | None = None,
        limit: int = 100,
        node_types: Sequence[str] | None = None,
        created_from: Any = None,
        created_to: Any = None,
    ) -> Page:
        """One page (1..1000 nodes) of the owner's current nodes in insertion order, optionally
        only of ``scopes``, ``node_types`` and stored within [``created_from``, ``created_to``]."""
        owner = check_owner(owner)
        limit = check_limit(limit, maximum=MAX_PAGE)
        check_flag(include_inactive, "include_inactive")
        scope_filter = None if scopes is None else self.check_scopes(scopes)
        after = _parse_cursor(cursor)
        lifecycles = None if include_inactive else [lc.value for lc in (Lifecycle.TENTATIVE, Lifecycle.STABLE)]
        bounds = {
            name: None if value is None else to_epoch_us(check_aware(value, name))
            for name, value in (("created_from", created_from), ("created_to", created_to))
        }
        with self.store.transaction() as tx:
            rows = tx.scan_nodes(
                owner,
                scopes=scope_filter,
                lifecycles=lifecycles,
                after_seq=after,
                limit=limit + 1,
                node_types=None if node_types is None else list(node_types),
                created_from_us=bounds["created_from"],
                created_to_us=bounds["created_to"],
            )
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = str(rows[-1][0]) if more and rows else None
        return Page(items=tuple(node for _, node in rows), next_cursor=next_cursor)

    def iterate(
        self, owner: str, *, scopes: Sequence[str] | None = None, include_inactive: bool = False, page_size: int = 500
    ) -> Iterator[MemoryNode]:
        """Every current node of the owner, fetched in bounded pages."""
        cursor: str | None = None
        while True:
            page = self.scan(owner, scopes=scopes, include_inactive=include_inactive, cursor=cursor, limit=page_size)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor


def _node_key(owner: Any, node_id: Any) -> tuple[str, UUID]:
    """The checked owner and node id of a call about one node."""
    return check_owner(owner), parse_uuid(node_id, "node_id")


def _not_found(key: UUID) -> NodeNotFound:
    return NodeNotFound(f"node {key} does not exist for this owner")


def _current(tx: StoreSession, owner: str, key: UUID) -> MemoryNode:
    """The node's current version within ``tx``; ``NodeNotFound`` when the owner has no such node."""
    node = tx.get_node(owner, key)
    if node is None:
        raise _not_found(key)
    return node


def _parse_cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or not cursor.isdigit():
        raise InvalidInput("cursor", "must be the next_cursor string of a previous page")
    return int(cursor)


def _first_version(owner: str, node_id: UUID, inp: MemoryInput, now: Any) -> MemoryNode:
    """Version 1 of a new memory: every field the caller supplied, with its id, owner and clock."""
    return MemoryNode(
        **inp.model_dump(exclude={"id"}),
        id=node_id,
        owner=owner,
        version=1,
        content_hash=content_sha256(inp.content),
        created_at=now,
        updated_at=now,
    )
