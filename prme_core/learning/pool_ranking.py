"""Many recorded pools re-ranked at once: what pool-replay fitting evaluates thousands of times.

``PoolSet`` holds the pools of judged requests as flat arrays and re-ranks all of them under one
ranking adjustment with the same arithmetic as ``retrieval.ranking.rank_pool`` (and therefore as
retrieval): query-specific redistribution and the adjustment per request, formula 1
(``formula.weighted_base_scores``), the current-update coefficient
(``scoring.current_update_coefficient_array``), the base order (score, path score, id), session
inheritance from the top members (a neighbour takes a trigger's score times the decay when that
is higher, or enters the list), the re-sort by (score, id) when inheritance changed anything,
``min_score`` and the limit. Only the loops are replaced by array operations; every number is
the same float operation in the same order. ``tests/learning/test_pool_ranking.py`` checks the
result against ``retrieval.pool_replay.replay_pool`` (and so against fresh retrievals).

A set is ranked in one feature layout (``PoolSet.layout``; default the current one): each
pool's columns are read in the layout its record names and remapped to it by feature name
(``features.FeatureLayout.remap``), so pools of different receipt versions rank together.

Judged labels sit on items: pool members and the outside session neighbours a pool records.
``judged_metrics`` scores a ranking with judged-positive NDCG@k over the whole returned list
(an unlabelled item carries no gain and is never treated as a negative; only explicit pairs
enter pairwise accuracy) and pairwise accuracy over explicit pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from prme_core.features import FeatureLayout, current_layout
from prme_core.learning.metrics import ndcg_at_k_batch, pairwise_accuracy_batch
from prme_core.receipts.pool import PoolColumns
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.formula import weighted_base_scores
from prme_core.retrieval.multipliers import RankingMultipliers, adjusted_weights
from prme_core.retrieval.scoring import current_update_coefficient_array, redistribute

ABSENT = np.int64(1 << 40)
"""The position of an item a ranking did not return (behind everything returned)."""


@dataclass(frozen=True)
class PoolRequest:
    """One judged request's pool and labels (node ids as 16-byte UUIDs). ``relevant_total``,
    when given, is how many relevant nodes the request has in all (a complete relevant set,
    some of them perhaps outside the pool): NDCG's ideal then counts them all."""

    columns: PoolColumns
    positives: tuple[bytes, ...]
    negatives: tuple[bytes, ...]
    relevant_total: int | None = None


@dataclass(frozen=True)
class PoolRanking:
    """The returned lists of every request: ``item`` (indices into the set's items) in rank
    order, grouped by request (``starts``), with their scores; ``position`` of every item
    (``ABSENT`` where not returned)."""

    item: np.ndarray
    score: np.ndarray
    starts: np.ndarray
    position: np.ndarray

    def returned(self, request: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.starts[request], self.starts[request + 1]
        return self.item[a:b], self.score[a:b]


class PoolSet:
    """Flat arrays over the members (then outside neighbours) of many pools."""

    def __init__(self, requests: Sequence[PoolRequest], layout: FeatureLayout | None = None) -> None:
        self.layout = layout = layout or current_layout()
        self.requests = len(requests)
        contexts: dict[bytes, int] = {}
        self.contexts: list[tuple[ScoringWeights, bool, bool, RankingMultipliers | None]] = []
        members, outside = [], []
        ctx, top_k, decay, min_score, limit = [], [], [], [], []
        for r in requests:
            c = r.columns
            replay = c.replay
            # values parsed from verified pool rows: a sorted-key dump identifies the context
            key = orjson.dumps(
                [replay["scoring"], replay["current_state"], replay["episodic"], replay["multipliers"]],
                option=orjson.OPT_SORT_KEYS,
            )
            at = contexts.get(key)
            if at is None:
                at = contexts[key] = len(self.contexts)
                recorded = replay["multipliers"]
                self.contexts.append(
                    (
                        ScoringWeights.model_validate(replay["scoring"]),
                        bool(replay["current_state"]),
                        bool(replay["episodic"]),
                        None if recorded is None else RankingMultipliers.model_validate(recorded),
                    )
                )
            ctx.append(at)
            top_k.append(int(replay["session_top_k"]) if c.has_neighbours else 0)
            decay.append(float(replay["session_decay"]))
            min_score.append(float(replay["min_score"]))
            limit.append(int(replay["limit"]))
            members.append(c.members)
            outside.append(c.outside)
        m, o = np.array(members, dtype=np.int64), np.array(outside, dtype=np.int64)
        self.n = n = int(m.sum())
        self.member_request = np.repeat(np.arange(self.requests), m)
        self.member_start = np.concatenate([[0], np.cumsum(m)])
        outside_request = np.repeat(np.arange(self.requests), o)
        outside_start = np.concatenate([[0], np.cumsum(o)])
        self.item_request = np.concatenate([self.member_request, outside_request])
        self.context = np.array(ctx, dtype=np.int64)
        self.top_k, self.decay = np.array(top_k, dtype=np.int64), np.array(decay)
        self.min_score, self.limit = np.array(min_score), np.array(limit, dtype=np.int64)
        features = (
            np.concatenate([layout.remap(r.columns.features, r.columns.layout) for r in requests])
            if n
            else np.zeros((0, layout.width))
        )
        self.features = np.asfortranarray(features)  # formula 1 reads it column by column
        f = self.features
        self.relevance = f[:, layout.index("semantic")] + f[:, layout.index("lexical")] if n else np.zeros(0)
        self.path_score = np.minimum(
            _bit_count(np.concatenate([r.columns.paths for r in requests] or [np.zeros(0, np.uint8)])) / 3.0, 1.0
        )
        self.eligible = np.concatenate([r.columns.update_eligible for r in requests] or [np.zeros(0, bool)])
        self.member_context = self.context[self.member_request]
        # Members of each context (weight set), so formula 1 runs once per context with one
        # weight row instead of gathering a weight row per member.
        self._by_context = [np.flatnonzero(self.member_context == c) for c in range(len(self.contexts))]
        single = len(self._by_context) == 1
        self._context_features = [
            self.features if single else np.asfortranarray(self.features[rows]) for rows in self._by_context
        ]
        self._context_relevance = [self.relevance if single else self.relevance[rows] for rows in self._by_context]
        self._context_eligible = [self.eligible if single else self.eligible[rows] for rows in self._by_context]
        self._column = np.arange(n) - self.member_start[self.member_request]
        self._widest = int(m.max(initial=0))
        # Node ids: member ids then outside ids, each as (high, low) 64-bit halves; the id rank of
        # an item among its request's items is the final tie-break.
        raw = b"".join(r.columns.node_bytes for r in requests) + b"".join(r.columns.outside_bytes for r in requests)
        halves = (
            np.frombuffer(raw, dtype=">u8").reshape(-1, 2).astype(np.uint64) if raw else np.zeros((0, 2), np.uint64)
        )
        self.id_rank = _id_ranks(self.item_request, halves, self.requests)
        # The base order's tie-break (path score, then id) as one integer rank per member.
        tie_order = _ordered_within(self.member_request, self.path_score, self.id_rank[:n], self.requests)
        self._member_tie = np.empty(n, dtype=np.int64)
        self._member_tie[tie_order] = np.arange(n)
        self.items = n + int(o.sum())
        # Session neighbours as (source member, target item) pairs in source order.
        src, dst = [], []
        for i, r in enumerate(requests):
            c = r.columns
            if not c.has_neighbours or not c.neighbour_refs.size:
                continue
            owner = np.repeat(np.arange(c.members), np.diff(c.neighbour_offsets))
            refs = c.neighbour_refs
            src.append(self.member_start[i] + owner)
            dst.append(np.where(refs < c.members, self.member_start[i] + refs, n + outside_start[i] + refs - c.members))
        self.neighbour_source = np.concatenate(src) if src else np.zeros(0, np.int64)
        self.neighbour_target = np.concatenate(dst) if dst else np.zeros(0, np.int64)
        # Judged labels on items (a node may sit in many requests' pools: look it up in its own).
        label_item, label_positive, label_request = [], [], []
        pairs_p, pairs_n, pairs_r = [], [], []
        for i, r in enumerate(requests):
            first = len(label_item)
            starts = (int(self.member_start[i]), n + int(outside_start[i]))
            for node in r.positives:
                label_item.append(_item(r.columns, node, starts))
                label_positive.append(True)
                label_request.append(i)
            p_count = len(label_item) - first
            for node in r.negatives:
                label_item.append(_item(r.columns, node, starts))
                label_positive.append(False)
                label_request.append(i)
            n_count = len(label_item) - first - p_count
            pp, nn = np.divmod(np.arange(p_count * n_count), n_count) if n_count else (np.zeros(0), np.zeros(0))
            pairs_p.append(first + pp)
            pairs_n.append(first + p_count + nn)
            pairs_r.append(np.full(p_count * n_count, i))
        self.label_item = np.array(label_item, dtype=np.int64)
        self.label_positive = np.array(label_positive, dtype=bool)
        self._positive_item = np.zeros(self.items)
        self._positive_item[self.label_item[self.label_positive]] = 1.0
        self.label_request = np.array(label_request, dtype=np.int64)
        self.pair_positive = np.concatenate(pairs_p).astype(np.int64) if pairs_p else np.zeros(0, np.int64)
        self.pair_negative = np.concatenate(pairs_n).astype(np.int64) if pairs_n else np.zeros(0, np.int64)
        self.pair_request = np.concatenate(pairs_r).astype(np.int64) if pairs_r else np.zeros(0, np.int64)
        self.item_ids = raw
        totals = [r.relevant_total for r in requests]
        self.relevant_totals = (
            None
            if all(t is None for t in totals)
            else np.array([len(r.positives) if t is None else t for r, t in zip(requests, totals)], dtype=np.int64)
        )

    def node_id(self, item: int) -> bytes:
        return self.item_ids[16 * item : 16 * item + 16]

    # --- ranking --------------------------------------------------------------------------

    def applied(self, adjustment: RankingMultipliers | None, *, recorded: bool = False) -> list[ScoringWeights]:
        """The weight set formula 1 uses per context: redistribution, then ``adjustment`` (or,
        with ``recorded``, each context's recorded multipliers)."""
        out = []
        for scoring, current, episodic, recorded_multipliers in self.contexts:
            shifted, _ = redistribute(scoring, current=current, episodic=episodic)
            out.append(adjusted_weights(shifted, recorded_multipliers if recorded else adjustment))
        return out

    def rank(
        self, adjustment: RankingMultipliers | None, *, recorded: bool = False, positive_margin: float = 0.0
    ) -> PoolRanking:
        """Every request's returned list under ``adjustment`` (None: the configured scoring).

        ``positive_margin`` > 0 orders the final lists as if every judged-positive item scored
        that much less (the returned scores stay true): a training objective that counts a
        positive as ahead only when it leads by the margin. Retrieval never does this."""
        weights = self.applied(adjustment, recorded=recorded)
        n = self.n
        s1 = np.empty(n)
        for c, rows in enumerate(self._by_context):
            if not rows.size:
                continue
            ws, f = weights[c], self._context_features[c]
            size = rows.size
            vector = np.array(self.layout.weight_vector(ws), dtype=np.float64)
            base = weighted_base_scores(
                f,
                np.broadcast_to(vector, (size, vector.size)),
                np.broadcast_to(np.array([ws.temporal_boost, ws.relevance_floor]), (size, 2)),
                self.layout,
            )
            coefficient = current_update_coefficient_array(
                base,
                self._context_relevance[c],
                self._context_eligible[c],
                ws.current_update_multiplier,
                ws.relevance_floor,
                weighted=True,
            )
            if len(self._by_context) == 1:
                s1 = base * coefficient
            else:
                s1[rows] = base * coefficient
        req = self.member_request
        # Only the best members can be returned or lend their score: those at or above each
        # request's depth-th best base score (depth = the largest limit or inheritance depth), ties
        # included. Every other member scores below at least that many members (inheritance only
        # raises scores), so it can neither trigger inheritance nor make any returned list unless
        # inherited into it, which the neighbour pairs below add back. Sorting only these keeps
        # an evaluation near-linear in the pool sizes.
        candidate = self._best_members(s1)
        members = np.flatnonzero(candidate)
        order = members[_ordered_within(req[members], s1[members], self._member_tie[members], self.requests)]
        base_position = np.full(n, ABSENT, dtype=np.int64)
        counts = np.bincount(req[order], minlength=self.requests)
        base_position[order] = np.arange(order.size) - np.concatenate([[0], np.cumsum(counts)])[req[order]]
        final = np.full(self.items, -np.inf)
        final[members] = s1[members]
        changed = np.zeros(self.requests, dtype=bool)
        src, dst = self.neighbour_source, self.neighbour_target
        if src.size:
            source_request = req[src]
            active = base_position[src] < self.top_k[source_request]
            src, dst, source_request = src[active], dst[active], source_request[active]
            inherited = s1[src] * self.decay[source_request]
            own = np.where(dst < n, s1[np.minimum(dst, max(n - 1, 0))], -np.inf)
            # a target outside the best members enters with its own score unless inheritance beats it
            promoted_member = dst < n
            final[dst[promoted_member]] = np.maximum(final[dst[promoted_member]], own[promoted_member])
            np.maximum.at(final, dst, inherited)
            changed[source_request[(dst >= n) | (inherited > own)]] = True
        present = np.flatnonzero(final > -np.inf)
        item_req = self.item_request[present]
        # Re-sorted by (score, id) where inheritance changed the list, else by (score, path, id):
        # when no list changed and nothing was added, that is the base order already at hand.
        if not changed.any() and present.size == order.size and not positive_margin:
            ranked = order
        else:
            member_tie = self._member_tie[np.minimum(present, max(n - 1, 0))]
            tie = np.where(changed[item_req] | (present >= n), self.id_rank[present], member_tie)
            key = final[present]
            if positive_margin:
                key = key - positive_margin * self._positive_item[present]
            ranked = present[_ordered_within(item_req, key, tie, self.requests)]
        ranked_req = self.item_request[ranked]
        ranked_score = final[ranked]
        kept = ranked_score >= self.min_score[ranked_req]
        ranked, ranked_req, ranked_score = ranked[kept], ranked_req[kept], ranked_score[kept]
        counts = np.bincount(ranked_req, minlength=self.requests)
        starts = np.concatenate([[0], np.cumsum(counts)])
        within = np.arange(ranked.size) - starts[ranked_req]
        keep = within < self.limit[ranked_req]
        ranked, ranked_req, ranked_score, within = ranked[keep], ranked_req[keep], ranked_score[keep], within[keep]
        starts = np.concatenate([[0], np.cumsum(np.bincount(ranked_req, minlength=self.requests))])
        position = np.full(self.items, ABSENT, dtype=np.int64)
        position[ranked] = within
        return PoolRanking(item=ranked, score=ranked_score, starts=starts, position=position)

    def _best_members(self, s1: np.ndarray) -> np.ndarray:
        """Members whose base score is at least their request's ``depth``-th best (ties kept)."""
        depth = int(max(self.limit.max(initial=0), self.top_k.max(initial=0)))
        if self.n == 0 or self._widest <= depth:
            return np.ones(self.n, dtype=bool)
        matrix = np.full((self.requests, self._widest), -np.inf)
        matrix[self.member_request, self._column] = s1
        threshold = -np.partition(-matrix, depth - 1, axis=1)[:, depth - 1]
        return s1 >= threshold[self.member_request]

    # --- judged metrics -------------------------------------------------------------------

    def judged_metrics(self, ranking: PoolRanking, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(judged-positive NDCG@k, pairwise accuracy over explicit pairs) per request."""
        positions = ranking.position[self.label_item]
        ndcg = ndcg_at_k_batch(
            positions, self.label_positive, self.label_request, self.requests, k, self.relevant_totals
        )
        accuracy = pairwise_accuracy_batch(
            positions, self.pair_positive, self.pair_negative, self.pair_request, self.requests
        )
        return ndcg, accuracy

    def judged_scores(self, ranking: PoolRanking) -> np.ndarray:
        """Each label's returned score (0 where its item was not returned): the pairwise loss's input."""
        scores = np.zeros(self.items)
        scores[ranking.item] = ranking.score
        return scores[self.label_item]


def _row_columns(rows: np.ndarray, requests: int) -> tuple[np.ndarray, int]:
    """Each element's column when the elements of every row are laid side by side (rows may be
    interleaved; within a row the given order is kept), and the widest row."""
    grouped = np.argsort(rows, kind="stable")
    counts = np.bincount(rows, minlength=requests)
    starts = np.concatenate([[0], np.cumsum(counts)])
    column = np.empty(rows.size, dtype=np.int64)
    column[grouped] = np.arange(rows.size) - starts[rows[grouped]]
    return column, int(counts.max(initial=0))


def _id_ranks(rows: np.ndarray, halves: np.ndarray, requests: int) -> np.ndarray:
    """Each item's rank among its request's items by node id (the UUID's 128-bit value, as
    (high, low) 64-bit halves): the final tie-break of every ordering."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.int64)
    column, width = _row_columns(rows, requests)
    top = np.iinfo(np.uint64).max
    high, low = np.full((requests, width), top, dtype=np.uint64), np.full((requests, width), top, dtype=np.uint64)
    high[rows, column], low[rows, column] = halves[:, 0], halves[:, 1]
    order = np.lexsort((low, high), axis=1)
    ranks = np.empty((requests, width), dtype=np.int64)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(width), (requests, width)), axis=1)
    return ranks[rows, column]


def _ordered_within(rows: np.ndarray, values: np.ndarray, tie: np.ndarray, requests: int) -> np.ndarray:
    """Indices ordering elements by row, then value descending, then ``tie`` ascending — what
    ``np.lexsort((tie, -values, rows))`` gives, sorted row by row in a padded matrix (rows hold a
    few dozen elements, so this is several times faster than one sort over all of them)."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.int64)
    column, width = _row_columns(rows, requests)
    score = np.full((requests, width), np.inf)
    ties = np.full((requests, width), np.iinfo(np.int64).max)
    index = np.full((requests, width), -1, dtype=np.int64)
    score[rows, column] = -values
    ties[rows, column] = tie
    index[rows, column] = np.arange(rows.size)
    order = np.lexsort((ties, score), axis=1)
    flat = np.take_along_axis(index, order, axis=1).ravel()
    return flat[flat >= 0]


def _bit_count(masks: np.ndarray) -> np.ndarray:
    m = masks.astype(np.int64)
    return ((m & 1) + ((m >> 1) & 1) + ((m >> 2) & 1)).astype(np.float64)


def _item(columns: PoolColumns, node: bytes, starts: tuple[int, int]) -> int:
    """The item index of a judged node: a member of this request's pool or one of its outside
    neighbours (ids are unique 16-byte blocks, so an aligned match is the node)."""
    for raw, start in ((columns.node_bytes, starts[0]), (columns.outside_bytes, starts[1])):
        at = raw.find(node)
        while at >= 0 and at % 16:
            at = raw.find(node, at + 1)
        if at >= 0:
            return start + at // 16
    raise ValueError("a judged candidate is neither a member of its request's pool nor a recorded neighbour")


def recorded_lists(ranking: PoolRanking, pools: PoolSet) -> list[tuple[list[bytes], list[float]]]:
    """(node ids, scores) of each request's returned list (for checks against receipts)."""
    out: list[tuple[list[bytes], list[float]]] = []
    for r in range(pools.requests):
        items, scores = ranking.returned(r)
        out.append(([pools.node_id(int(i)) for i in items], scores.tolist()))
    return out
