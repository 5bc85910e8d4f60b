"""Learning benchmark: wall time and peak memory of the snapshot cut plus ``evaluate_learning``
for 10k and 100k relevance records (1,000 query groups, 50-candidate receipts) on DuckDB.

Run: ``python -m benchmarks.learning [--records 10000,100000] [--groups 1000]``.
Target (issue 5): 100k records in ≤ 30 s on this machine, snapshot read from DuckDB included.

Setup writes genuine version-9 receipts (scores from the real formula, candidates in the real
sort order; a sample of them is parsed back through the full receipt model, which replays
every score) and structured-evaluation records with a planted lexical signal, directly in bulk.
The measured part runs in a fresh process so its peak RSS is the evaluation's own; a
10x-smaller run in the same invocation is the baseline for the scaling ratio.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

import numpy as np

from prme_core.canonical import canonical_json
from prme_core.feedback.records import record_operation_id
from prme_core.feedback.relevance import OP_RELEVANCE, RelevanceRecord
from prme_core.learning.synthetic import SYNTHETIC_CLOCK, synthetic_receipt
from prme_core.receipts.model import RetrievalReceipt
from prme_core.receipts.projection import pack_columns
from prme_core.receipts.store import OP_RECEIPT, PROJECTION_COLUMNS, receipt_operation_id
from prme_core.retrieval.config import ScoringWeights
from prme_core.retrieval.formula import weighted_base_scores
from prme_core.storage import open_store
from prme_core.types import to_epoch_us

OWNER = "bench-owner"
CANDIDATES = 50
JUDGED = 10
CHUNK = 5000
_TRACE_KEYS = ("f_semantic", "f_lexical", "f_graph", "f_recency", "f_salience", "f_confidence")


def _template() -> dict:
    receipt, _ = synthetic_receipt(random.Random(0), owner=OWNER, query="template", candidates=CANDIDATES)
    return receipt.canonical_dict()


def write_dataset(url: str, records: int, groups: int, seed: int = 5) -> None:
    """Bulk-write ``records`` receipts (one per record) and records into the store at ``url``."""
    rng = np.random.default_rng(seed)
    weights = ScoringWeights()
    wvec = np.array(weights.vector())
    template = _template()
    store = open_store(url)
    done = 0
    started = time.perf_counter()
    while done < records:
        n = min(CHUNK, records - done)
        feats = np.concatenate([rng.random((n, CANDIDATES, 6)), np.ones((n, CANDIDATES, 1)),
                                np.zeros((n, CANDIDATES, 1)), np.ones((n, CANDIDATES, 1))], axis=2)
        flat = feats.reshape(-1, 9)
        scores = weighted_base_scores(flat, np.tile(wvec, (flat.shape[0], 1)),
                                      np.tile([weights.temporal_boost, weights.relevance_floor], (flat.shape[0], 1))
                                      ).reshape(n, CANDIDATES)
        paths = rng.random((n, CANDIDATES)) < 0.5
        path_score = np.where(paths, 2.0 / 3.0, 1.0 / 3.0)
        raw_ids = rng.integers(0, 2**63, size=(n, CANDIDATES, 2), dtype=np.int64).astype(np.uint64)
        order = np.lexsort((raw_ids[..., 1], raw_ids[..., 0], -path_score, -scores), axis=-1)
        op_rows, projection_rows, record_rows = [], [], []
        for i in range(n):
            o = order[i]
            g = (done + i) % groups
            request_id = uuid.UUID(int=int(rng.integers(0, 2**62)) << 64 | (done + i), version=4)
            ids = [str(uuid.UUID(int=(int(a) << 64) | int(b))) for a, b in raw_ids[i][o]]
            f, s, p, ps = feats[i][o], scores[i][o], paths[i][o], path_score[i][o]
            cands = []
            for r in range(CANDIDATES):
                trace = [*f[r].tolist(), float(ps[r]), float(s[r])]
                cands.append({"node_id": ids[r], "scope": "personal",
                              "content_sha256": hashlib.sha256(ids[r].encode()).hexdigest(), "score": float(s[r]),
                              "paths": ["lexical", "semantic"] if p[r] else ["lexical"], "in_context": False,
                              "has_content": False, "token_cost": 0,
                              "provenance": {"formula_version": 1, "weights": 0, "trace": trace}})
            query = f"benchmark question {g}"
            header = {"schema_version": 9, "request_id": str(request_id), "owner": OWNER, "scope_key": "personal",
                      "query": query, "ranking_policy": "score_path_id", "fusion": "weighted",
                      "candidate_count": CANDIDATES}
            columns = {"node_id": ids, "base_node_id": ids, "adjustments": ["[]"] * CANDIDATES,
                       "rank": list(range(CANDIDATES)), "formula_version": [1] * CANDIDATES,
                       "in_context": [0] * CANDIDATES, "has_content": [0] * CANDIDATES,
                       "context_position": [-1] * CANDIDATES, "token_cost": [0] * CANDIDATES,
                       "score": s.tolist(), "reranker_score": [float("nan")] * CANDIDATES,
                       "f_path_score": ps.tolist(), "f_base_score": s.tolist()}
            for c, name in enumerate(("f_semantic", "f_lexical", "f_graph", "f_recency", "f_salience", "f_confidence",
                                      "f_epistemic_weight", "f_temporal_affinity", "f_node_type_boost")):
                columns[name] = f[:, c].tolist()
            for c, name in enumerate(("w_semantic", "w_lexical", "w_graph", "w_recency", "w_salience", "w_confidence")):
                columns[name] = [float(wvec[c])] * CANDIDATES
            columns["w_temporal_boost"] = [weights.temporal_boost] * CANDIDATES
            columns["w_relevance_floor"] = [weights.relevance_floor] * CANDIDATES
            packed = pack_columns(header, columns)
            doc = {**template, "request_id": str(request_id), "query": query, "candidates": cands,
                   "projection_sha256": packed.digest()}
            payload = canonical_json(doc, finite=True)
            checksum = hashlib.sha256(payload).hexdigest()
            if (done + i) % 4999 == 0:  # prove the generated bytes are genuine, replayable receipts
                RetrievalReceipt.model_validate_json(payload)
            op_rows.append((receipt_operation_id(OWNER, request_id), OWNER, OP_RECEIPT, "personal", str(request_id),
                            payload.decode(), checksum, to_epoch_us(SYNTHETIC_CLOCK)))
            projection_rows.append((OWNER, str(request_id), checksum, 9, "personal", query, "score_path_id",
                                    "weighted", CANDIDATES, packed.int_columns, packed.float_columns,
                                    packed.node_ids, packed.base_node_ids, packed.adjustments))
            lexical = f[:JUDGED, 1] + rng.normal(0.0, 0.15, JUDGED)
            labels = {ids[r]: bool(lexical[r] > 0.7) for r in range(JUDGED)}
            feedback_id = uuid.UUID(int=int(rng.integers(0, 2**62)) << 64 | (done + i), version=4)
            record = RelevanceRecord(feedback_id=feedback_id, request_id=request_id, labels=labels, surface="results",
                                     method="structured_evaluation", owner=OWNER, recorded_at=SYNTHETIC_CLOCK,
                                     receipt_checksum=checksum, scope_key="personal")
            body = record.canonical_bytes()
            record_rows.append((record_operation_id("relevance", OWNER, feedback_id), OWNER, OP_RELEVANCE, "personal",
                                str(feedback_id), body.decode(), hashlib.sha256(body).hexdigest(),
                                to_epoch_us(SYNTHETIC_CLOCK)))
        with store.transaction() as tx:
            cols = ("id", "owner", "op_type", "scope_key", "target_id", "payload", "checksum", "admitted_us")
            tx.conn.bulk_insert("operations", cols, op_rows + record_rows)
            tx.conn.bulk_insert("receipt_projections", PROJECTION_COLUMNS, projection_rows)
        done += n
        print(f"  setup: {done:,}/{records:,} records written ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr, flush=True)
    store.close()


_CHILD = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from prme_core.storage import open_store
from prme_core.learning.snapshot import cut_snapshot
from prme_core.learning.offline import evaluate_learning
start = time.perf_counter()
store = open_store(sys.argv[1])
snapshot = cut_snapshot(store, "bench-owner", max_records=int(sys.argv[2]))
cut = time.perf_counter() - start
report = evaluate_learning(snapshot, owner="bench-owner", scopes=["personal"])
total = time.perf_counter() - start
print(json.dumps({"cut_s": cut, "total_s": total, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "decision": report.decision, "lexical": report.multipliers.lexical,
                  "gain": report.validation_ndcg_gain, "groups": report.coverage.training_queries + report.coverage.validation_queries,
                  "pairs": report.coverage.explicit_pairs}))
"""


def measure(url: str, records: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, url, str(max(records, 1))], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", default="10000,100000")
    parser.add_argument("--groups", type=int, default=1000)
    args = parser.parse_args()
    sizes = [int(x) for x in args.records.split(",")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            url = f"duckdb:///{Path(tmp) / f'learning-{size}.duckdb'}"
            write_dataset(url, size, args.groups)
            results[size] = measure(url, size)
            r = results[size]
            print(f"{size:,} records, {args.groups:,} query groups, {CANDIDATES}-candidate receipts, {JUDGED} judged each")
            print(f"  snapshot cut (DuckDB)            {r['cut_s']:8.2f} s")
            print(f"  cut + evaluate_learning          {r['total_s']:8.2f} s   "
                  f"{'target ≤ 30 s' if size >= 100_000 else ''}")
            print(f"  peak RSS of the evaluation       {r['peak_rss_mb']:8.0f} MB")
            print(f"  decision {r['decision']}, lexical ×{r['lexical']:.2f}, validation NDCG gain "
                  f"{r['gain'] if r['gain'] is None else round(r['gain'], 4)}, {r['groups']} groups, {r['pairs']:,} pairs")
            Path(tmp, f"learning-{size}.duckdb").unlink(missing_ok=True)
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        ratio = results[large]["total_s"] / results[small]["total_s"]
        print(f"scaling: {large // small}x the records took {ratio:.1f}x the time")


if __name__ == "__main__":
    main()
