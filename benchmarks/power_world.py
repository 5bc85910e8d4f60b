"""A planted-effect world for the power study: synthetic owners whose true full-retrieval gain
is known.

Every query has a pool of scored members (six additive features uniform in [0, 1], neutral
factor features, and the three query–memory interaction features). Relevance is planted: a
member's true score is formula 1 under the base weights *plus* ``beta`` times its
``term_coverage``, plus Gaussian noise; the query's relevant members are the best 1–3 by true
score. With ``beta = 0`` the base ranking is already the best the family can do (no profile
has a true gain); with ``beta > 0`` the family-2 profile whose ``term_coverage`` weight is
``beta`` ranks by the noiseless true score. ``calibrate`` finds the ``beta`` whose profile
gains exactly δ NDCG@10 over base retrieval against complete relevant sets, on a large sample.

Feedback queries become genuine replayable receipts (the real formula and sort order, the
complete pool recorded, so the learner fits by pool replay) and relevance records that label
every returned candidate. Holdout queries keep their complete relevant sets; a profile's
holdout ranking is the engine's batched pool ranker (``learning.pool_ranking``, tested equal
to retrieval's pool replay) over the same pool, which is what a fresh retrieval returns here:
candidate generation does not depend on the profile.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import cache
from uuid import UUID

import numpy as np

from prme_core.features import FACTOR_NAMES, INTERACTION_NAMES, NEUTRAL_FACTORS, TRACE_FEATURES, WEIGHT_COUNT
from prme_core.feedback.relevance import RelevanceRecord
from prme_core.learning.pool_ranking import PoolRequest, PoolSet
from prme_core.learning.synthetic import SYNTHETIC_CLOCK, features_receipt
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.projection import scope_key
from prme_core.receipts.store import receipt_bytes
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.formula import weighted_base_scores
from prme_core.retrieval.multipliers import RankingMultipliers

OWNER = "planted-owner"
SCOPES = ("personal",)
POOL = 60
"""Members per pool (retrieval's default depth is 250; 60 keeps a study of thousands of fits
affordable, and only the top of a pool can move into the first ten)."""
RETURNED = 20
"""Candidates each feedback retrieval returns; every one is labelled (as the LoCoMo benchmark does)."""
K = 10
NOISE = 0.03
"""Standard deviation of the noise on the true score (base NDCG@10 about 0.77, recall@10 0.98)."""
COVERED_SHARE = 0.2
"""Share of queries whose members carry term coverage (the rest have none, so no profile of this
family changes their ranking through it). With these settings the planted profile gaining +0.03
changes 14% of the holdout rankings and worsens 2.4%, with a per-query spread of 0.13 (LoCoMo's
learned profiles: 0.14) and a harm of 0.006. Noisier worlds were tried first: there the learned
profiles' harm (0.02–0.03 at +0.03) failed the holdout's harm bound of 0.02 whatever the volume,
so they measured that bound, not the evidence the gates need."""
RELEVANT_COUNTS = ((1, 0.7), (2, 0.2), (3, 0.1))
"""How many members of a query are relevant, with their probabilities (LoCoMo: 1.37 on average)."""
MISSED, WRONG = 0.15, 0.01
"""Feedback label noise: a relevant returned memory is left unmarked 15% of the time, another
returned memory is marked relevant 1% of the time (the holdout's complete relevant sets are
exact). On the LoCoMo development data the validation groups' differences spread 1.4 times as
much as the holdout's (0.198 against 0.136 for the tenant-sized owner); without label noise
this world's spread the same (0.14 and 0.15), which made the offline gate stronger than it is
on real feedback."""
BASE = ScoringWeights()
_SEMANTIC, _LEXICAL, _GRAPH, _RECENCY, _SALIENCE, _CONFIDENCE = (
    TRACE_FEATURES.index(name) for name in ("semantic", "lexical", "graph", "recency", "salience", "confidence")
)
_TC = TRACE_FEATURES.index("term_coverage")
_BIGRAM = TRACE_FEATURES.index("bigram_overlap")
_ENTITY = TRACE_FEATURES.index("entity_match")


def planted_profile(beta: float) -> RankingMultipliers:
    """The family-2 profile that ranks by the noiseless true score of a world with ``beta``."""
    return RankingMultipliers(term_coverage=beta, bigram_overlap=0.0, entity_match=0.0)


def draw_features(rng: np.random.Generator, members: int = POOL) -> np.ndarray:
    """One pool's feature rows (``TRACE_FEATURES`` order), shaped like conversation memories:
    semantic and lexical similarity vary, recency varies within a range, and graph proximity,
    salience and confidence are the same for every memory (as on the LoCoMo data)."""
    feats = np.zeros((members, len(TRACE_FEATURES)))
    feats[:, _SEMANTIC] = rng.random(members)
    feats[:, _LEXICAL] = rng.random(members)
    feats[:, _GRAPH] = 0.0
    feats[:, _RECENCY] = 0.3 + 0.7 * rng.random(members)
    feats[:, _SALIENCE] = 0.5
    feats[:, _CONFIDENCE] = 0.8
    for name in FACTOR_NAMES:
        feats[:, TRACE_FEATURES.index(name)] = NEUTRAL_FACTORS[name]
    feats[:, _TC] = rng.random(members) if rng.random() < COVERED_SHARE else 0.0
    feats[:, _BIGRAM] = rng.random(members) * rng.random(members)
    feats[:, _ENTITY] = (rng.random(members) < 0.2).astype(np.float64)
    return feats


def true_scores(feats: np.ndarray, beta: float, rng: np.random.Generator) -> np.ndarray:
    n = len(feats)
    w = np.tile(np.array(BASE.additive_vector()), (n, 1))
    w[:, WEIGHT_COUNT + INTERACTION_NAMES.index("term_coverage")] = beta
    scalars = np.tile(np.array([BASE.temporal_boost, BASE.relevance_floor]), (n, 1))
    return weighted_base_scores(feats, w, scalars) + rng.normal(0.0, NOISE, n)


def draw_relevant(feats: np.ndarray, beta: float, rng: np.random.Generator) -> np.ndarray:
    """Indices of the planted relevant members: the best 1–3 by true score."""
    counts, probs = zip(*RELEVANT_COUNTS, strict=True)
    r = int(rng.choice(counts, p=probs))
    return np.argsort(-true_scores(feats, beta, rng), kind="stable")[:r]


@dataclass
class Query:
    text: str
    feats: np.ndarray
    relevant: np.ndarray  # row indices


def draw_queries(rng: np.random.Generator, beta: float, count: int, prefix: str) -> list[Query]:
    out = []
    for i in range(count):
        feats = draw_features(rng)
        out.append(Query(f"{prefix} question {i}", feats, draw_relevant(feats, beta, rng)))
    return out


def _ids_rng(seed_text: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(seed_text.encode()).digest()[:8], "big"))


def receipt_of(query: Query, ids_seed: str) -> tuple[RetrievalReceipt, list[UUID]]:
    """The base retrieval's receipt (complete pool recorded) and the members' node ids."""
    return features_receipt(
        _ids_rng(ids_seed), query.feats, owner=OWNER, query=query.text, scopes=SCOPES, candidates=RETURNED, weights=BASE
    )


def feedback_record(receipt: RetrievalReceipt, relevant: set[UUID], feedback_seed: str) -> RelevanceRecord:
    """Labels for every returned candidate, as a person gives them: a relevant memory is marked
    relevant with probability 1 − ``MISSED``, another one with probability ``WRONG``."""
    rng = _ids_rng(feedback_seed)
    feedback_id = UUID(int=rng.getrandbits(128), version=4)
    labels = {
        c.node_id: (rng.random() >= MISSED) if c.node_id in relevant else (rng.random() < WRONG)
        for c in receipt.candidates
    }
    return RelevanceRecord(
        feedback_id=feedback_id,
        request_id=receipt.request_id,
        labels=labels,
        surface="results",
        method="structured_evaluation",
        owner=receipt.owner,
        recorded_at=SYNTHETIC_CLOCK,
        receipt_checksum=hashlib.sha256(receipt_bytes(receipt)).hexdigest(),
        scope_key=scope_key(receipt.scopes),
    )


class Holdout:
    """Holdout queries with complete relevant sets, ranked by the engine's pool ranker."""

    def __init__(self, queries: list[Query], seed: str) -> None:
        requests = []
        for i, q in enumerate(queries):
            receipt, ids = receipt_of(q, f"{seed}:holdout:{i}")
            relevant = {ids[j].bytes for j in q.relevant}
            others = tuple(u.bytes for u in ids if u.bytes not in relevant)
            requests.append(PoolRequest(receipt.pool_columns(), tuple(sorted(relevant)), others, len(relevant)))
        self.pools = PoolSet(requests)
        self.size = len(queries)
        self._totals = np.array([len(q.relevant) for q in queries], dtype=np.float64)
        self.base = self.metrics(None)

    def metrics(self, adjustment: RankingMultipliers | None) -> tuple[np.ndarray, np.ndarray]:
        """(NDCG@10, recall@10) per query under ``adjustment`` (None: base scoring)."""
        ranking = self.pools.rank(adjustment)
        ndcg, _ = self.pools.judged_metrics(ranking, K)
        positions = ranking.position[self.pools.label_item]
        hit = (positions < K) & self.pools.label_positive
        recall = np.bincount(self.pools.label_request[hit], minlength=self.size) / self._totals
        return ndcg, recall


def planted_gain(beta: float, *, queries: int = 4000, seed: int = 2026) -> float:
    """Mean NDCG@10 gain of the planted profile over base ranking (complete relevant sets)."""
    rng = np.random.default_rng(seed)
    holdout = Holdout(draw_queries(rng, beta, queries, "calibration"), f"calibration:{seed}")
    ndcg, _ = holdout.metrics(planted_profile(beta))
    return float(np.mean(ndcg - holdout.base[0]))


@cache
def calibrate(delta: float, *, tolerance: float = 0.0005) -> float:
    """The ``beta`` whose planted profile gains ``delta`` (bisection on a fixed sample)."""
    if delta == 0.0:
        return 0.0
    lo, hi = 0.0, 0.5
    if planted_gain(hi) < delta:
        raise ValueError(f"no beta in [0, 0.5] plants a gain of {delta}")
    for _ in range(30):
        mid = (lo + hi) / 2
        gain = planted_gain(mid)
        if abs(gain - delta) <= tolerance:
            return round(mid, 5)
        lo, hi = (mid, hi) if gain < delta else (lo, mid)
    return round((lo + hi) / 2, 5)
