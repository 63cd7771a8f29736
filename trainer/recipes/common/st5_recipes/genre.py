"""STS-B dev Spearman × 100, overall and by genre (captions, forums, news), for st5 model
directories, embedded with the `st5` CLI. Dev only: decisions are never made on test.

    python -m st5_recipes.genre models/st5-mini [MODEL_DIR ...]
    python -m st5_recipes.genre MODEL_DIR --whiten TRAIN_TEXTS.txt
    python -m st5_recipes.genre models/st5-small [MODEL_DIR ...] --sick

`--sick` also scores SICK-R's other splits, train and trial (5,000 pairs; `st5 eval`'s SICK-R is
the test split): a second dev set, so that a decision does not rest on STS-B dev's 1,500 pairs
alone.

`--whiten` also scores linear post-processings fitted on the model's embeddings of TRAIN_TEXTS
(one training sentence a line, never dev or test): the mean direction projected out, then
BERT-whitening (Su et al. 2021, https://arxiv.org/abs/2103.15316) at several strengths. Each is
a 384 × 384 matrix that the Dense layer (no bias) could absorb.
"""
import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[4]
DEV = ROOT.parent / "shared" / "data" / "stsbenchmark" / "sts-dev.csv"
SICK_DEV = [ROOT.parent / "shared" / "data" / "sick" / f for f in ["SICK_train.txt", "SICK_trial.txt"]]
ST5 = os.environ.get("ST5", str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "st5"))


def embed(model, texts):
    with tempfile.TemporaryDirectory() as d:
        Path(d, "in.txt").write_text("\n".join(t.replace("\n", " ") for t in texts) + "\n")
        subprocess.run([ST5, "embed", "--model", model, "--input", f"{d}/in.txt", "--output", f"{d}/out.npy"], check=True)
        return np.load(f"{d}/out.npy")


def scores(ea, eb, y, genre, w=None):
    if w is not None:
        ea, eb = ea @ w, eb @ w
        ea = ea / np.linalg.norm(ea, axis=1, keepdims=True)
        eb = eb / np.linalg.norm(eb, axis=1, keepdims=True)
    s = (ea * eb).sum(1)
    parts = [("all", genre == genre)] + [(g.removeprefix("main-"), genre == g) for g in sorted(set(genre))]
    return " ".join(f"{name} {spearmanr(s[m], y[m])[0] * 100:.2f}" for name, m in parts)


def sick_dev():
    """SICK train and trial: (sentences A, sentences B, relatedness) over both files."""
    rows = []
    for path in SICK_DEV:
        lines = open(path, encoding="utf-8").read().splitlines()
        rows += [line.split("\t") for line in lines[1:] if line]
    return [r[1] for r in rows], [r[2] for r in rows], np.array([float(r[3]) for r in rows])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--whiten", help="training sentences to fit the post-processings on")
    ap.add_argument("--sick", action="store_true", help="also score SICK-R train + trial")
    args = ap.parse_args()
    rows = [r for r in (line.rstrip("\n").split("\t") for line in open(DEV, encoding="utf-8")) if len(r) >= 7]
    y = np.array([float(r[4]) for r in rows])
    genre = np.array([r[0] for r in rows])
    sick = sick_dev() if args.sick else None
    for model in args.models:
        ea, eb = embed(model, [r[5] for r in rows]), embed(model, [r[6] for r in rows])
        print(model, scores(ea, eb, y, genre))
        if sick:
            a, b, rel = sick
            s = (embed(model, a) * embed(model, b)).sum(1)
            print(f"  SICK-R train + trial {spearmanr(s, rel)[0] * 100:.2f}")
        if args.whiten:
            t = embed(model, Path(args.whiten).read_text().splitlines())
            eye = np.eye(t.shape[1])
            u = t.mean(0) / np.linalg.norm(t.mean(0))
            no_mean = eye - np.outer(u, u)
            lam, v = np.linalg.eigh(np.cov(t.T))
            print("  mean direction out", scores(ea, eb, y, genre, no_mean))
            for alpha in [0.25, 0.5]:
                w = no_mean @ v @ np.diag((lam + 1e-3) ** -alpha) @ v.T
                print(f"  + whitening, power {alpha}", scores(ea, eb, y, genre, w))


if __name__ == "__main__":
    main()
