"""Session-neighbour inheritance and two-stage episode routing.

Session context: each of the top ``session_context_top_k`` candidates with a session id lends
its neighbours within ``session_context_window`` turns (same scope and session) its score times
``session_context_score_decay``, recorded as a ``session_decay`` operation on a copy of its
provenance; an existing candidate is promoted only when the inherited score is higher.

Episode routing (optional, ``episode_context_top_k`` > 0): candidate-backed (scope, session)
episodes are ranked with BM25 over their whole text; in each of the top episodes up to
``episode_context_local_k`` members best matching the query inherit the episode anchor's score
times ``episode_context_score_decay`` (an ``episode_decay`` operation).

Either stage changes the order only through recorded operations, and when it changes the
ranking the list is re-sorted by (−score, id): the "score_id" sort policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from prme_core.retrieval.corpus import Corpus, _LexicalIndex
from prme_core.retrieval.ranked import Op, Ranked
from prme_core.retrieval.text import lexical_tokens

Eligible = Callable[[int], bool]


def _place(items: list[Ranked], by_row: dict[int, int], candidate: Ranked) -> bool:
    """Insert or promote; True when the list changed."""
    at = by_row.get(candidate.row)
    if at is None:
        by_row[candidate.row] = len(items)
        items.append(candidate)
        return True
    current = items[at]
    if candidate.score > current.score:
        candidate.paths |= current.paths
        items[at] = candidate
        return True
    return False


@dataclass(frozen=True)
class Neighbour:
    """A session neighbour a trigger can lend its score to: member key, node key, cross-scope."""

    row: int
    node_key: int
    cross_scope: bool


NeighbourSource = Callable[[int], Sequence[Neighbour]]
"""Member key → its eligible session neighbours within the window, in session order."""


def corpus_neighbours(corpus: Corpus, eligible: np.ndarray, cross: np.ndarray, window: int) -> NeighbourSource:
    """Neighbours from a live corpus (same scope and session, within ``window`` turns, eligible),
    computed once per row per request."""
    cache: dict[int, list[Neighbour]] = {}

    def of(row: int) -> list[Neighbour]:
        found = cache.get(row)
        if found is None:
            found = cache[row] = []
            sid = corpus.session_id[row]
            if sid is not None:
                members = corpus.sessions[(str(corpus.scope[row]), sid)]
                at = int(corpus.session_position[row])
                for pos in range(max(0, at - window), min(len(members), at + window + 1)):
                    other = members[pos]
                    if other != row and eligible[other]:
                        found.append(Neighbour(other, corpus.uuids[other].int, bool(cross[other])))
        return found

    return of


def expand_sessions(items: list[Ranked], neighbours: NeighbourSource, *, top_k: int, decay: float) -> bool:
    """Session-neighbour inheritance in place; True when the ranking changed."""
    if top_k <= 0:
        return False
    triggers = items[:top_k]
    by_row = {r.row: i for i, r in enumerate(items)}
    changed = False
    for trigger in triggers:
        for n in neighbours(trigger.row):
            inherited = trigger.inherit(
                n.row, Op("session_decay", decay, None, trigger.row), n.node_key, "session", n.cross_scope
            )
            changed |= _place(items, by_row, inherited)
    return changed


def _episode_index(corpus: Corpus) -> tuple[list[tuple[str, str]], dict[tuple[str, str], int], _LexicalIndex]:
    """Episodes of the corpus and their BM25 index, built on first use and kept with the corpus."""
    cached = corpus.extras.get("episodes")
    if cached is None:
        keys = sorted(corpus.sessions)
        docs = [[t for row in corpus.sessions[k] for t in lexical_tokens(corpus.content[row])] for k in keys]
        cached = (keys, {k: i for i, k in enumerate(keys)}, _LexicalIndex(docs, corpus.lexical.bm25))
        corpus.extras["episodes"] = cached
    return cached


def route_episodes(
    items: list[Ranked],
    corpus: Corpus,
    eligible: np.ndarray,
    cross: np.ndarray,
    query_tokens: list[str],
    *,
    top_k: int,
    local_k: int,
    decay: float,
) -> bool:
    """Two-stage episode routing in place; True when the ranking changed."""
    if top_k <= 0 or not items:
        return False
    bm25_all = corpus.lexical.scores(query_tokens)
    keys, key_index, index = _episode_index(corpus)
    episode_scores = index.scores(query_tokens)
    anchors: dict[int, Ranked] = {}
    for r in items:  # the best candidate of each episode anchors it
        sid = corpus.session_id[r.row]
        if sid is None:
            continue
        e = key_index[(str(corpus.scope[r.row]), sid)]
        if e not in anchors or r.score > anchors[e].score:
            anchors[e] = r
    routed = sorted(anchors, key=lambda e: (-episode_scores[e], keys[e]))[:top_k]
    by_row = {r.row: i for i, r in enumerate(items)}
    changed = False
    for e in routed:
        if episode_scores[e] <= 0.0:
            continue
        anchor = anchors[e]
        members = [
            row for row in corpus.sessions[keys[e]] if row != anchor.row and eligible[row] and bm25_all[row] > 0.0
        ]
        members.sort(key=lambda row: (-bm25_all[row], int(corpus.session_position[row])))
        for row in members[:local_k]:
            inherited = anchor.inherit(
                row, Op("episode_decay", decay, None, anchor.row), corpus.uuids[row].int, "episode", bool(cross[row])
            )
            changed |= _place(items, by_row, inherited)
    return changed
