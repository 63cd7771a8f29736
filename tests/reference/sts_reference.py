"""Avg7 STS (Spearman x100 of cosine; STS12-16 pooled "all" setting) of a sentence-transformers
model with sentence-transformers + scipy, to set beside `st5 eval --tasks sts` on the same model.
STS-B dev is printed too (stsb-dev, outside Avg7): the split every training decision is made on.

MODEL is a directory, or `teacher:NAME` for a distillation teacher of
trainer/recipes/st5-small-v2/teachers.py (minilm, mpnet), scored before anyone relies on it.

    /tmp/st5-ref/bin/python tests/reference/sts_reference.py tests/fixtures/st-enc-mean-relu
    /tmp/st5-ref/bin/python tests/reference/sts_reference.py teacher:mpnet
"""
import glob
import os
import sys
from pathlib import Path

import numpy as np
import scipy.stats
import torch
from sentence_transformers import SentenceTransformer

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def read(path):
    raw = open(path, "rb").read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return text.lstrip("\ufeff").splitlines()


def year(name):
    pairs = []
    for gs in sorted(glob.glob(str(DATA / name / "STS.gs.*.txt"))):
        sub = gs.split("STS.gs.")[1][:-4]
        inp = DATA / name / f"STS.input.{sub}.txt"
        if sub == "ALL" or not inp.exists():
            continue
        for g, line in zip(read(gs), read(inp)):
            if g.strip():
                a, b = line.split("\t")[:2]
                pairs.append((a, b, float(g)))
    return pairs


def main():
    torch.set_num_threads(2)
    if sys.argv[1].startswith("teacher:"):
        from st5_recipes import teachers

        model = teachers.load(sys.argv[1].removeprefix("teacher:"))
    else:
        # Test checkpoints without a tokenizer of their own use T5's.
        kwargs = {} if (Path(sys.argv[1]) / "tokenizer.json").exists() else {"tokenizer_file": str(DATA / "t5_tokenizer" / "tokenizer.json")}
        model = SentenceTransformer(sys.argv[1], device="cpu", tokenizer_kwargs=kwargs)
    tasks = {y: year(y) for y in ["sts12", "sts13", "sts14", "sts15", "sts16"]}
    tasks["stsb"] = [(c[5], c[6], float(c[4])) for c in (l.split("\t") for l in read(DATA / "stsbenchmark" / "sts-test.csv")) if len(c) >= 7]
    stsb_dev = [(c[5], c[6], float(c[4])) for c in (l.split("\t") for l in read(DATA / "stsbenchmark" / "sts-dev.csv")) if len(c) >= 7]
    tasks["sickr"] = [(c[1], c[2], float(c[3])) for c in (l.split("\t") for l in read(DATA / "sick" / "SICK_test_annotated.txt")[1:]) if len(c) >= 4]
    scores = {}
    for name, pairs in [*tasks.items(), ("stsb-dev", stsb_dev)]:
        a = model.encode([p[0] for p in pairs], batch_size=64, convert_to_numpy=True)
        b = model.encode([p[1] for p in pairs], batch_size=64, convert_to_numpy=True)
        cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
        scores[name] = 100 * scipy.stats.spearmanr(cos, [p[2] for p in pairs]).correlation
    print(" ".join(f"{k}={v:.2f}" for k, v in scores.items()), f"Avg7={np.mean([scores[k] for k in tasks]):.2f}")


if __name__ == "__main__":
    main()
