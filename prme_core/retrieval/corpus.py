"""The per-owner retrieval corpus: active nodes as arrays, a BM25 index, embeddings, sessions.

Building a corpus costs one read of the owner's active nodes plus index construction; it is
cached per owner and rebuilt only when the owner's memory revision changes (one cheap query per
retrieval checks it), so retrieval reads no node rows on the hot path. The BM25 parameters are
an engine setting (``retrieval.bm25``, in ``EngineSettings.bm25``); a cache serves one set of
them, and ``lexical_identity`` is what receipts record, so rankings made under other
parameters carry another feature identity.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import bm25s
import numpy as np
from scipy import sparse

from prme_core.canonical import parse_json
from prme_core.retrieval.bm25 import Bm25Parameters
from prme_core.retrieval.embedding import EmbeddingProvider, cosine_scores, row_norms
from prme_core.retrieval.query_analysis import has_date, has_update_language
from prme_core.retrieval.text import LEXICAL_ANALYZER_ID, lexical_tokens
from prme_core.storage.base import Store

EPISTEMIC_WEIGHTS = {
    "observed": 1.0,
    "asserted": 0.9,
    "inferred": 0.7,
    "hypothetical": 0.3,
    "conditional": 0.5,
    "deprecated": 0.1,
    "unverified": 0.5,
}
_CONDITION_STATES = {"true": "asserted", "unknown": "hypothetical", "false": "deprecated", "expired": "deprecated"}
MAX_CACHED_OWNERS = 32


def epistemic_weight(epistemic_type: str, metadata: dict[str, Any] | None) -> float:
    """The multiplicative epistemic factor; a conditional node is read by its condition state."""
    if epistemic_type == "conditional":
        state = str((metadata or {}).get("condition_state", "unknown")).lower()
        epistemic_type = _CONDITION_STATES.get(state, "hypothetical")
    return EPISTEMIC_WEIGHTS.get(epistemic_type, 0.7)


def lexical_identity(bm25: Bm25Parameters) -> dict[str, Any]:
    """The lexical channel as receipts record it (part of the execution feature identity)."""
    return {"backend": "bm25s", "version": bm25s.__version__, **bm25.as_parameters(), "analyzer": LEXICAL_ANALYZER_ID}


class _LexicalIndex:
    """BM25 (bm25s, Lucene variant) over the corpus; empty corpora score nothing."""

    def __init__(self, tokens: list[list[str]], bm25: Bm25Parameters) -> None:
        self.size = len(tokens)
        self.bm25 = bm25
        self.vocabulary: set[str] = {t for doc in tokens for t in doc}
        self._index = None
        if self.size and self.vocabulary:
            self._index = bm25s.BM25(**bm25.as_parameters())
            self._index.index(tokens, show_progress=False)

    def scores(self, query_tokens: list[str]) -> np.ndarray:
        known = [t for t in query_tokens if t in self.vocabulary]
        if self._index is None or not known:
            return np.zeros(self.size, dtype=np.float64)
        return self._index.get_scores(known).astype(np.float64)


class _VectorIndex:
    """Cosine similarity of a query with every document embedding.

    Hashed embeddings hold a few small integers per row, so they are kept as a CSR matrix: the
    product reads a fifth of the bytes of a dense one and integer sums stay exact (hence
    deterministic, in any order). Stored by column, a query reads only the columns where it is
    non-zero (a tenth of the matrix for a short query). Real-valued embeddings stay dense and
    use ``cosine_scores``.
    """

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix
        self.norms = row_norms(matrix)
        integral = matrix.size == 0 or bool(np.all(matrix == np.round(matrix)))
        exact = integral and (not self.norms.size or float(self.norms.max()) ** 2 < 2.0**24)
        self.sparse = sparse.csc_matrix(matrix) if exact and matrix.size else None

    def cosine(self, query: np.ndarray) -> np.ndarray:
        q = np.asarray(query, dtype=np.float32)
        qnorm = float(np.sqrt(np.sum(q.astype(np.float64) ** 2)))
        if self.sparse is None or qnorm**2 >= 2.0**24:
            return cosine_scores(self.matrix, self.norms, q, qnorm)
        used = np.flatnonzero(q)
        dots = (self.sparse[:, used] @ q[used]).astype(np.float64)
        denominator = self.norms * qnorm
        out = np.zeros(dots.shape[0], dtype=np.float64)
        np.divide(dots, denominator, out=out, where=denominator > 0.0)
        return np.clip(out, -1.0, 1.0)


@dataclass
class Corpus:
    """Arrays over one owner's active nodes, row i describing node ``ids[i]``."""

    owner: str
    revision: int  # the owner's memory revision read before the rows (see StoreSession.memory_revision)
    ids: list[str]
    uuids: list[UUID]
    scope: np.ndarray
    node_type: list[str]
    content: list[str]
    content_hash: list[str]
    session_id: list[str | None]
    event_us: np.ndarray
    created_us: np.ndarray
    updated_us: np.ndarray
    valid_from_us: np.ndarray
    valid_to_us: np.ndarray
    salience: np.ndarray
    confidence: np.ndarray
    epistemic_type: list[str]
    epistemic: np.ndarray
    dated: np.ndarray
    updating: np.ndarray
    lexical: _LexicalIndex
    vectors: _VectorIndex
    sessions: dict[tuple[str, str], list[int]]
    session_position: np.ndarray
    neighbours: dict[int, list[tuple[int, float]]]
    index_of: dict[str, int] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)  # lazily built indexes (episodes)

    @property
    def size(self) -> int:
        return len(self.ids)

    def scope_mask(self, scopes: tuple[str, ...]) -> np.ndarray:
        """Rows whose scope is in ``scopes`` (cached per scope set; treat as read-only)."""
        key = ("scope_mask", scopes)
        mask = self.extras.get(key)
        if mask is None:
            mask = self.extras[key] = np.isin(self.scope, list(scopes)) if self.size else np.zeros(0, dtype=bool)
        return mask

    def session_windows(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """Every row's session neighbours within ``window`` turns (same scope and session, in
        session order, the row itself left out) as CSR arrays (offsets, rows); computed once per
        corpus and window. Eligibility is the request's to apply."""
        key = ("session_windows", window)
        table = self.extras.get(key)
        if table is None:
            offsets, out = [0], []
            for row in range(self.size):
                sid = self.session_id[row]
                if sid is not None:
                    members = self.sessions[(str(self.scope[row]), sid)]
                    at = int(self.session_position[row])
                    out.extend(m for m in members[max(0, at - window) : at + window + 1] if m != row)
                offsets.append(len(out))
            table = self.extras[key] = (np.array(offsets, dtype=np.int64), np.array(out, dtype=np.int64))
        return table

    def epistemic_mask(self, types: frozenset[str]) -> np.ndarray:
        """Rows whose epistemic type is one of ``types`` (cached per set; treat as read-only)."""
        key = ("epistemic_mask", types)
        mask = self.extras.get(key)
        if mask is None:
            mask = self.extras[key] = (
                np.isin(np.array(self.epistemic_type, dtype=object), sorted(types))
                if self.size
                else np.zeros(0, dtype=bool)
            )
        return mask

    def memory_us(self) -> np.ndarray:
        """Each node's memory time: event time, else updated time, else created time (computed
        once per corpus; treat as read-only)."""
        found = self.extras.get("memory_us")
        if found is None:
            found = self.extras["memory_us"] = np.where(np.isnan(self.event_us), self.updated_us, self.event_us)
        return found

    def stated_us(self) -> np.ndarray:
        """Each node's stated time: event time, else created time (computed once per corpus;
        treat as read-only)."""
        found = self.extras.get("stated_us")
        if found is None:
            found = self.extras["stated_us"] = np.where(np.isnan(self.event_us), self.created_us, self.event_us)
        return found


def _float_column(table: Any, name: str) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in table.column(name).to_pylist()], dtype=np.float64)


def build_corpus(
    owner: str,
    revision: int,
    table: Any,
    edges: list[tuple[str, str, str, float]],
    embedder: EmbeddingProvider,
    bm25: Bm25Parameters,
) -> Corpus:
    ids = [str(v) for v in table.column("id").to_pylist()]
    content = table.column("content").to_pylist()
    scope = np.array(table.column("scope").to_pylist(), dtype=object)
    session = table.column("session_id").to_pylist()
    epistemic_type = table.column("epistemic_type").to_pylist()
    metadata_raw = table.column("metadata").to_pylist()
    epistemic = np.array(
        [
            epistemic_weight(e, parse_json(m) if e == "conditional" else None)
            for e, m in zip(epistemic_type, metadata_raw)
        ],
        dtype=np.float64,
    )
    tokens = [lexical_tokens(text) for text in content]
    matrix = embedder.embed_documents(content) if content else np.zeros((0, embedder.dimension), dtype=np.float32)
    sessions: dict[tuple[str, str], list[int]] = {}
    position = np.full(len(ids), -1, dtype=np.int64)
    for i, sid in enumerate(session):
        if sid is not None:
            members = sessions.setdefault((str(scope[i]), sid), [])
            position[i] = len(members)
            members.append(i)
    index_of = {node_id: i for i, node_id in enumerate(ids)}
    neighbours: dict[int, list[tuple[int, float]]] = {}
    for source, target, _type, weight in edges:
        a, b = index_of.get(str(source)), index_of.get(str(target))
        if a is None or b is None:
            continue  # an edge to an inactive node does not carry proximity
        neighbours.setdefault(a, []).append((b, float(weight)))
        neighbours.setdefault(b, []).append((a, float(weight)))
    return Corpus(
        owner=owner,
        revision=revision,
        ids=ids,
        uuids=[UUID(i) for i in ids],
        scope=scope,
        node_type=table.column("node_type").to_pylist(),
        content=content,
        content_hash=table.column("content_hash").to_pylist(),
        session_id=session,
        event_us=_float_column(table, "event_us"),
        created_us=_float_column(table, "created_us"),
        updated_us=_float_column(table, "updated_us"),
        valid_from_us=_float_column(table, "valid_from_us"),
        valid_to_us=_float_column(table, "valid_to_us"),
        salience=np.array(table.column("salience").to_pylist(), dtype=np.float64),
        confidence=np.array(table.column("confidence").to_pylist(), dtype=np.float64),
        epistemic_type=epistemic_type,
        epistemic=epistemic,
        dated=np.array([has_date(t) for t in content], dtype=bool),
        updating=np.array([has_update_language(t) for t in content], dtype=bool),
        lexical=_LexicalIndex(tokens, bm25),
        vectors=_VectorIndex(matrix),
        sessions=sessions,
        session_position=position,
        neighbours=neighbours,
        index_of=index_of,
    )


class CorpusCache:
    """Owner → corpus, rebuilt when the owner's memory revision changes (LRU of 32 owners).

    The revision changes with every commit that writes the owner's memory, in commit order, and
    is read before the rows, so a cached corpus never lacks a memory committed before the read.
    A cache builds with one set of BM25 parameters and serves only corpora built with them.
    """

    def __init__(
        self,
        store: Store,
        embedder: EmbeddingProvider,
        capacity: int = MAX_CACHED_OWNERS,
        *,
        bm25: Bm25Parameters | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.capacity = capacity
        self.bm25 = bm25 or Bm25Parameters()
        self._cache: OrderedDict[str, Corpus] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, owner: str, revision: int | None = None) -> Corpus:
        """The owner's corpus at ``revision`` or newer: the owner's memory revision, read by the
        caller just now (the pipeline reads it with the profile pointer), or None to read it here."""
        with self.store.transaction(read_only=True) as tx:
            if revision is None:
                revision = tx.memory_revision(owner)  # first: the rows read below are at least this new
            with self._lock:
                cached = self._cache.get(owner)
                if cached is not None:
                    self._cache.move_to_end(owner)
            if cached is not None and cached.revision == revision and cached.lexical.bm25 == self.bm25:
                return cached
            table = tx.active_node_table(owner)
            edges = tx.edge_list(owner)
        corpus = build_corpus(owner, revision, table, edges, self.embedder, self.bm25)
        with self._lock:
            current = self._cache.get(owner)
            if current is None or current.revision <= revision:  # a slower rebuild never replaces a newer one
                self._cache[owner] = corpus
            self._cache.move_to_end(owner)
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return corpus
