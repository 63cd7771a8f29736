"""How closely a student fits its distillation targets: the mean cosine between its embeddings
and the targets, overall and for each source of the sentences (`counts.json` gives each source's
lines, in `texts.jsonl`'s order), on a fixed sample of training sentences. Training data only:
it says where the student underfits, not how well it scores (STS-B dev says that, `st5_recipes.genre`).

    python -m st5_recipes.fit target/st5-small-v2-data/stages/2-distill [MODEL_DIR ...]

Embeds with the `st5` CLI ($ST5, else $CARGO_TARGET_DIR or target/, release build); reads the
data directory $ST5_DATA (default /var/tmp/st5-small-v2-data).
"""
import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
DATA = Path(os.environ.get("ST5_DATA", "/var/tmp/st5-small-v2-data"))
ST5 = os.environ.get("ST5", str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "st5"))


def sample(counts, per_source, seed=0):
    """Sorted line numbers of `per_source` sentences from each source, the same for every model."""
    rng = np.random.default_rng(seed)
    start, picks = 0, {}
    for name, n in counts.items():
        picks[name] = np.sort(rng.choice(np.arange(start, start + n), min(per_source, n), replace=False))
        start += n
    return picks, start


def fit_split(fit, targets_name):
    """The sentences a warm start fits a Dense on and those it is scored on: `held`, fit.py's
    sample (300 a source), and `rows`, `fit` others drawn with seed 1 (minus the held ones);
    with the sentences and the targets file `targets_name` (memory-mapped)."""
    counts = json.loads((DATA / "counts.json").read_text())
    counts.pop("total")
    texts = [json.loads(line)["text"] for line in open(DATA / "texts.jsonl")]
    picks, _ = sample(counts, 300)
    held = np.concatenate(list(picks.values()))
    rows = np.setdiff1d(np.random.default_rng(1).choice(len(texts), fit, replace=False), held)
    return texts, rows, held, np.load(DATA / targets_name, mmap_mode="r")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help="st5 model directories")
    ap.add_argument("--targets", default="targets-mpnet-pca384.npy", help="the targets file in the data directory")
    ap.add_argument("--per-source", type=int, default=300)
    args = ap.parse_args()
    counts = json.loads((DATA / "counts.json").read_text())
    counts.pop("total")
    texts = [json.loads(line)["text"] for line in open(DATA / "texts.jsonl")]
    picks, lines = sample(counts, args.per_source)
    if lines != len(texts):
        raise SystemExit(f"counts.json has {lines} lines, texts.jsonl {len(texts)}")
    targets = np.load(DATA / args.targets, mmap_mode="r")
    rows = np.concatenate(list(picks.values()))
    with tempfile.TemporaryDirectory() as d:
        Path(d, "in.txt").write_text("\n".join(texts[i].replace("\n", " ") for i in rows) + "\n")
        for model in args.models:
            out = Path(d, "out.npy")
            subprocess.run([ST5, "embed", "--model", model, "--input", f"{d}/in.txt", "--output", str(out)], check=True)
            cos = (np.load(out) * targets[rows]).sum(1)
            print(f"{model}: mean cosine {cos.mean():.3f}")
            at = 0
            for name, idx in picks.items():
                print(f"  {name:18s} {cos[at:at + len(idx)].mean():.3f}")
                at += len(idx)


if __name__ == "__main__":
    main()
