"""The retrieval metrics' golden file, tests/fixtures/eval/retrieval.json: a generated run and
its judgements, with pytrec_eval's (trec_eval's) figures per query, which `st5 eval --tasks
retrieval:DIR` must equal (tests/eval.rs, to 1e-6). MTEB computes its retrieval figures with
pytrec_eval too.

The run has what trips implementations up: ties (scores on a 0.1 grid), graded relevance (0-3),
judged queries with nothing relevant, queries with no hits at all, runs shorter than 10 and
longer than 100, and ids whose byte order differs from their numeric order (d2, d10).

    python3 -m venv /var/tmp/refvenv && /var/tmp/refvenv/bin/pip install pytrec-eval-terrier==0.5.11
    /var/tmp/refvenv/bin/python tests/reference/retrieval_metrics.py
"""

import json
import random
from pathlib import Path

import pytrec_eval

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "retrieval.json"
rng = random.Random(56)
qrels, run = {}, {}
for q in range(60):
    qid = f"q{q}"
    docs = [f"d{i}" for i in rng.sample(range(300), rng.choice([5, 12, 40, 150]))]
    judged = rng.sample(docs, rng.randint(1, min(6, len(docs))))
    if q % 7 == 3:
        grades = [0] * len(judged)  # judged, nothing relevant
    else:
        grades = [rng.choice([0, 1, 1, 2, 3]) for _ in judged]
    extra = f"x{q}"  # relevant, never retrieved
    qrels[qid] = dict(zip(judged, grades)) | ({extra: 1} if q % 5 == 1 else {})
    hits = [] if q % 11 == 4 else docs
    run[qid] = {d: round(rng.random(), 1) for d in hits}

evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_10", "recall_100"})
full = evaluator.evaluate(run)
# MRR@10: trec_eval's reciprocal rank over the run cut at 10 in its own order (score
# descending, then the greater document id first).
cut = {q: dict(sorted(r.items(), key=lambda h: (h[1], h[0]), reverse=True)[:10]) for q, r in run.items()}
rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
zero = {"ndcg_cut_10": 0.0, "recall_10": 0.0, "recall_100": 0.0}
queries = []
for q in qrels:
    m = full.get(q, zero)
    queries.append({
        "id": q,
        "qrels": qrels[q],
        "run": run[q],
        "ndcg_at_10": m["ndcg_cut_10"],
        "recall_at_10": m["recall_10"],
        "recall_at_100": m["recall_100"],
        "mrr_at_10": rr.get(q, {"recip_rank": 0.0})["recip_rank"],
    })
OUT.write_text(json.dumps({"reference": f"pytrec_eval {pytrec_eval.__version__ if hasattr(pytrec_eval, '__version__') else 'terrier 0.5.11'}", "queries": queries}, indent=0) + "\n")
print(f"wrote {OUT} ({len(queries)} queries)")
