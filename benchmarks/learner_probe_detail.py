"""Holdout failure reasons, evidence spread and fitted weights per probe cell."""

import sys

import numpy as np

from benchmarks.learner_probe_summary import probe_cells

cells = probe_cells(sys.argv[1:])
print(
    "| variant | opts | δ | n | tc weight | bigram | entity | evidence SD | changed share | holdout gain | holdout harm | holdout pass | holdout refusals (gain/recall/p/harm) |"
)
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (v, o, d, n), rs in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][3], kv[0][0], kv[0][1])):
    tc = np.array([r["mult"].get("term_coverage", 0) for r in rs])
    bg = np.array([r["mult"].get("bigram_overlap", 0) for r in rs])
    em = np.array([r["mult"].get("entity_match", 0) for r in rs])
    h = [r["holdout"] for r in rs if "holdout" in r]
    if not h:
        continue
    why = [0, 0, 0, 0]
    for x in h:
        if x["ndcg_gain"] < 0.01:
            why[0] += 1
        elif x["recall_gain"] < 0:
            why[1] += 1
        elif x["sign_flip_p"] > 0.025:
            why[2] += 1
        elif x["harm"] > 0.02:
            why[3] += 1
    print(
        f"| {v} | {o} | {d} | {n} | {tc.mean():.3f}±{tc.std():.3f} | {bg.mean():.3f} | {em.mean():.3f} | "
        f"{np.mean([r['evidence_sd'] for r in rs]):.3f} | {np.mean([r['evidence_changed'] for r in rs]):.2f} | "
        f"{np.mean([x['ndcg_gain'] for x in h]):+.4f} | {np.mean([x['harm'] for x in h]):.4f} | "
        f"{sum(r['holdout_pass'] for r in rs)}/{len(rs)} | {'/'.join(map(str, why))} |"
    )
