"""The peers of `st5 eval --tasks retrieval:DIR`, on the same BEIR directories: BM25 (bm25s 0.3.16
with Snowball stemming and English stop words, k1 = 1.2, b = 0.75) and sentence-transformers
models in PyTorch (exact cosine), each searched to 100 and scored by pytrec_eval (trec_eval), the
reference st5's metrics equal (tests/eval.rs). Prints one Markdown row per (set, split, system).

    python -m st5_recipes.retrieval_peers --bm25 --models minilm,mpnet \\
        "$ST5_DATA/retrieval/wikiqa@dev" "$ST5_DATA/retrieval/wikiqa@test" ...
"""

import argparse
import json
from pathlib import Path

import numpy as np
import pytrec_eval


def load(spec):
    d, _, split = spec.rpartition("@") if "@" in spec else (spec, "", "test")
    d = Path(d)
    corpus = [json.loads(l) for l in open(d / "corpus.jsonl", encoding="utf-8") if l.strip()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, open(d / "queries.jsonl", encoding="utf-8")) if q}
    qrels = {}
    for i, line in enumerate(open(d / "qrels" / f"{split}.tsv", encoding="utf-8")):
        q, doc, s = line.rstrip("\n").split("\t")
        if i == 0 and not s.lstrip("-").isdigit():
            continue
        qrels.setdefault(q, {})[doc] = int(s)
    ids = [c["_id"] for c in corpus]
    texts = [(c.get("title", "") + " " + c["text"]).strip() if c.get("title") else c["text"].strip() for c in corpus]
    return d.name, split, ids, texts, [(q, queries[q]) for q in qrels], qrels


def score(run, qrels):
    e = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_10", "recall_100"})
    full = e.evaluate(run)
    cut = {q: dict(sorted(r.items(), key=lambda h: (h[1], h[0]), reverse=True)[:10]) for q, r in run.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    n = len(qrels)
    mean = lambda d, k: sum(v[k] for v in d.values()) / n
    return [mean(full, "ndcg_cut_10"), mean(full, "recall_10"), mean(full, "recall_100"), mean(rr, "recip_rank")]


def bm25_run(ids, texts, queries):
    import bm25s
    import Stemmer

    stem = Stemmer.Stemmer("english")
    r = bm25s.BM25(k1=1.2, b=0.75)
    r.index(bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False), show_progress=False)
    qt = bm25s.tokenize([t for _, t in queries], stopwords="en", stemmer=stem, show_progress=False)
    docs, scores = r.retrieve(qt, k=min(100, len(ids)), show_progress=False)
    return {q: {ids[d]: float(s) for d, s in zip(dr, sr) if s > 0} for (q, _), dr, sr in zip(queries, docs, scores)}


_CORPUS = {}


def dense_run(model, ids, texts, queries):
    # Each set's corpus once per model, whichever of its splits are scored.
    key = (id(model), tuple(ids))
    if key not in _CORPUS:
        _CORPUS[key] = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    d = _CORPUS[key]
    q = model.encode([t for _, t in queries], batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    s = q @ d.T
    top = np.argsort(-s, axis=1, kind="stable")[:, :100]
    return {qid: {ids[j]: float(s[i, j]) for j in top[i]} for i, (qid, _) in enumerate(queries)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", help="DIR or DIR@SPLIT (BEIR layout)")
    ap.add_argument("--bm25", action="store_true")
    ap.add_argument("--models", default="", help="comma-separated: minilm, mpnet, or a directory")
    args = ap.parse_args()
    models = {}
    for name in filter(None, args.models.split(",")):
        import torch
        from sentence_transformers import SentenceTransformer

        from st5_recipes.teachers import minilm_dir, mpnet_dir

        torch.set_num_threads(2)
        path = {"minilm": minilm_dir, "mpnet": mpnet_dir}.get(name, lambda: name)()
        models[name] = SentenceTransformer(str(path), device="cpu")
    print("| set | split | system | nDCG@10 | R@10 | R@100 | MRR@10 |\n|---|---|---|---|---|---|---|")
    for spec in args.sets:
        name, split, ids, texts, queries, qrels = load(spec)
        systems = ([("bm25", lambda: bm25_run(ids, texts, queries))] if args.bm25 else []) + [
            (m, lambda m=m: dense_run(models[m], ids, texts, queries)) for m in models
        ]
        for system, run in systems:
            cells = " | ".join(f"{100 * v:.2f}" for v in score(run(), qrels))
            print(f"| {name} | {split} | {system} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
