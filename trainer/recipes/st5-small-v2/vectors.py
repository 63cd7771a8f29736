"""Distillation data for st5-small-v2: one sentence list and each teacher's vectors for it, in
shards that a restarted run skips, so an interrupted job resumes where it stopped.

Sentences: st5-mini's two permissive pools (trainer/recipes/st5-mini/teacher.py: the first set,
then the extra set), then the broader text below, de-duplicated in that order. The trainer drops
any sentence found in an evaluation test split when it loads the file, and reports the count.

Layout under OUT ($ST5_DATA, default /var/tmp/st5-small-v2-data: outside target/, which a new
machine may not have kept; a lost OUT is rebuilt by running this again):
- texts.jsonl, counts.json: the sentences ({"text": ...} a line) and the count per source;
- TEACHER/shard-NNNNN.npy: float32 [≤ SHARD, dim], unit length, for lines SHARD·N onwards;
- targets-KIND.npy: float32 [lines, dim], what a distill stage reads (`--targets KIND`).

    python trainer/recipes/st5-small-v2/vectors.py --teachers mpnet,minilm
    python trainer/recipes/st5-small-v2/vectors.py --targets mpnet-pca384
    python trainer/recipes/st5-small-v2/vectors.py --dev   # each target kind scored on STS-B dev
"""

import argparse
import html
import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "st5-mini"))
sys.path.insert(0, str(HERE.parent / "st5-small"))
from genre import DEV, scores  # noqa: E402
from teacher import TRAIN, dedup, extra_sentences, sentences, split_sentences  # noqa: E402

import teachers  # noqa: E402

OUT = Path(os.environ.get("ST5_DATA", "/var/tmp/st5-small-v2-data"))
SHARD = 8192


def broader_sentences():
    """(source, sentence): the permissive text st5-mini's pools cut short. Stack Exchange posts
    are the nearest thing here to STS-B's forum genre (answers-forums), so every sentence of every
    question and answer is kept, not the first three; MedQuAD answers their second and third."""
    for site in ["beer", "coffee"]:  # CC BY-SA 3.0
        for row in ET.parse(TRAIN / "stackexchange_small" / f"{site}.stackexchange.com" / "Posts.xml").getroot():
            body = re.sub(r"<[^>]+>", " ", html.unescape(row.get("Body", "")))
            for s in split_sentences(body):
                if 20 <= len(s) <= 400:
                    yield ("stackexchange-all", s)
    for path in sorted((TRAIN / "medquad").glob("*/*.xml")):  # CC BY 4.0
        for qa in ET.parse(path).getroot().iter("QAPair"):
            for s in split_sentences(qa.findtext("Answer") or "")[1:3]:
                if 20 <= len(s) <= 400:
                    yield ("medquad-answers", s)


def write_texts(out):
    seen = set()
    texts, counts = [], {}
    for pool in (sentences, extra_sentences, broader_sentences):
        t, c = dedup(pool(), seen)
        texts += t
        counts.update({k: counts.get(k, 0) + v for k, v in c.items()})
    tmp = out / "texts.jsonl.tmp"
    with open(tmp, "w") as f:
        for s in texts:
            f.write(json.dumps({"text": s}) + "\n")
    (out / "counts.json").write_text(json.dumps({"total": len(texts), **counts}, indent=1))
    tmp.rename(out / "texts.jsonl")


def read_texts(out):
    with open(out / "texts.jsonl") as f:
        return [json.loads(line)["text"] for line in f]


def embed(out, name, texts, batch):
    model = teachers.load(name)
    d = out / name
    d.mkdir(exist_ok=True)
    shards = (len(texts) + SHARD - 1) // SHARD
    for k in range(shards):
        path = d / f"shard-{k:05d}.npy"
        if path.exists():
            continue
        t0 = time.time()
        v = model.encode(texts[k * SHARD:(k + 1) * SHARD], batch_size=batch, normalize_embeddings=True, convert_to_numpy=True)
        np.save(d / "partial.npy", v.astype(np.float32))
        (d / "partial.npy").rename(path)
        print(f"{name} shard {k + 1}/{shards}: {len(v) / (time.time() - t0):.1f} sentences/s", flush=True)


def teacher_vectors(out, name, lines):
    shards = sorted((out / name).glob("shard-*.npy"))
    if len(shards) * SHARD < lines:
        raise SystemExit(f"{out / name}: {len(shards)} shards, not all {lines} lines: run --teachers {name} first")
    return np.concatenate([np.load(p) for p in shards])


def pca(v, k):
    """The top-k principal directions of v's rows (centred), as a [dim, k] matrix."""
    mean = v.mean(0)
    _, _, vt = np.linalg.svd((v - mean)[:: max(1, len(v) // 100_000)], full_matrices=False)
    return vt[:k].T


def normalise(v):
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


# Each kind of distillation target, from the teachers' vectors. `mpnet-pca384` keeps the student at
# 384 dimensions: mpnet's vectors projected on their top 384 principal directions (uncentred at use,
# so cosine structure is kept up to the dropped directions), then unit length again.
def targets(out, kind, lines):
    if kind in teachers.TEACHERS:
        return teacher_vectors(out, kind, lines)
    if kind == "mpnet-pca384":
        v = teacher_vectors(out, "mpnet", lines)
        p = pca(v, 384)
        np.save(out / "mpnet-pca384-projection.npy", p.astype(np.float32))
        return normalise(v @ p)
    if kind == "concat":  # both teachers side by side, each half weighted equally
        return normalise(np.concatenate([teacher_vectors(out, "minilm", lines), teacher_vectors(out, "mpnet", lines)], 1))
    raise SystemExit(f"unknown targets kind {kind}")


def dev_report(out):
    """STS-B dev Spearman × 100 (overall and by genre) of each target kind, as a student that
    matched it exactly would score: the teachers embed the dev sentences, and the projection is
    fitted on the first shard of training vectors, as `targets` fits it on all of them."""
    rows = [r for r in (line.rstrip("\n").split("\t") for line in open(DEV, encoding="utf-8")) if len(r) >= 7]
    y = np.array([float(r[4]) for r in rows])
    genre = np.array([r[0] for r in rows])
    dev = {}
    for name in teachers.TEACHERS:
        m = teachers.load(name)
        dev[name] = [m.encode([r[i] for r in rows], batch_size=64, normalize_embeddings=True, convert_to_numpy=True) for i in (5, 6)]
    p = pca(np.load(out / "mpnet" / "shard-00000.npy"), 384)
    kinds = {
        "minilm": dev["minilm"],
        "mpnet": dev["mpnet"],
        "mpnet-pca384": [normalise(v @ p) for v in dev["mpnet"]],
        "concat": [normalise(np.concatenate([a, b], 1)) for a, b in zip(dev["minilm"], dev["mpnet"])],
    }
    for kind, (a, b) in kinds.items():
        print(kind, scores(a, b, y, genre), flush=True)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--teachers", default="", help="comma-separated teachers to embed with (minilm, mpnet)")
    ap.add_argument("--targets", default="", help="comma-separated target kinds to write (minilm, mpnet, mpnet-pca384, concat)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dev", action="store_true", help="score each target kind on STS-B dev")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "texts.jsonl").exists():
        write_texts(out)
    texts = read_texts(out)
    print(f"{len(texts)} sentences in {out / 'texts.jsonl'}", flush=True)
    import torch

    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    for name in filter(None, args.teachers.split(",")):
        embed(out, name, texts, args.batch)
    if args.dev:
        dev_report(out)
    for kind in filter(None, args.targets.split(",")):
        v = targets(out, kind, len(texts))
        np.save(out / f"targets-{kind}.tmp.npy", v)
        (out / f"targets-{kind}.tmp.npy").rename(out / f"targets-{kind}.npy")
        print("wrote", out / f"targets-{kind}.npy", v.shape)


if __name__ == "__main__":
    main()
