"""Distillation data for st5-small-v2: one sentence list and each teacher's vectors for it, in
shards that a restarted run skips, so an interrupted job resumes where it stopped.

Sentences: st5-mini's two permissive pools (st5_recipes.teacher: the first set,
then the extra set), then the broader text below, de-duplicated in that order. The trainer drops
any sentence found in an evaluation test split when it loads the file, and reports the count.

Layout under OUT ($ST5_DATA, default /var/tmp/st5-small-v2-data: outside target/, which a new
machine may not have kept; a lost OUT is rebuilt by running this again):
- texts.jsonl, counts.json: the sentences ({"text": ...} a line) and the count per source;
- TEACHER/shard-NNNNN.npy: float32 [≤ SHARD, dim], unit length, for lines SHARD·N onwards;
- targets-KIND.npy: float32 [lines, dim], what a distill stage reads (`--targets KIND`);
- texts-partK.jsonl, targets-KIND-partK.npy (`--split N`): every N-th line from line K, so that
  one pass over the sentences can be cut into N stages that each fit a session, each stage
  seeing every source (the sources are in order in texts.jsonl, so a cut in halves would not).

The chosen targets are also kept packed (`--pack`, run after each shard), so that a copy of one
small directory spares a new machine the ~70 minutes of both cores the teacher takes:
PACKED/projection.npy (mpnet's top 384 principal directions, fitted once on the first shard's
8,192 vectors, as the --dev table's projection was), PACKED/shard-NNNNN.npz (each shard
projected, as int8 with one scale a row: 3.1 MB instead of 25 MB; the smallest cosine to the
f32 projection was 0.99969 on the first shards) and PACKED/texts.sha256 (the sentence list they
belong to). PACKED is $ST5_PACKED, default OUT/packed/mpnet-pca384: outside git (the repository
holds the product; commit e281380 still holds the packed shards earlier sessions trained on, 104
MB). `--targets mpnet-pca384` is assembled from the packed shards, so every machine that shares
them trains on the same bytes; `--teachers mpnet` skips a shard that is packed, so a lost PACKED
is rebuilt by `--teachers mpnet --pack`.

    python trainer/recipes/st5-small-v2/vectors.py --teachers mpnet,minilm
    python trainer/recipes/st5-small-v2/vectors.py --targets mpnet-pca384
    python trainer/recipes/st5-small-v2/vectors.py --dev   # each target kind scored on STS-B dev
"""

import argparse
import hashlib
import html
import json
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from st5_recipes.genre import DEV, scores
from st5_recipes.teacher import TRAIN, dedup, extra_sentences, sentences, split_sentences

from st5_recipes import teachers

OUT = Path(os.environ.get("ST5_DATA", "/var/tmp/st5-small-v2-data"))
SHARD = 8192
PACKED = None  # set by main(): $ST5_PACKED, or packed/mpnet-pca384 under --out
PCA_SHARDS = 1


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


def embed(out, name, texts, batch, after_shard=None, bf16=False):
    import contextlib

    import torch

    model = teachers.load(name)
    # bf16 matrix products (AVX512-BF16 where the CPU has it): 1.3x the f32 speed here, and
    # within cosine 0.99995 of the f32 vectors (384 sentences of shard 8), far inside what
    # packing keeps (0.9997). Shards 0-8 were written in f32, the rest with --bf16.
    def precision():
        return torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    d = out / name
    d.mkdir(exist_ok=True)
    shards = (len(texts) + SHARD - 1) // SHARD
    for k in range(shards):
        path = d / f"shard-{k:05d}.npy"
        if path.exists() or (name == "mpnet" and packed_shard(k).exists()):
            continue
        t0 = time.time()
        with precision():
            v = model.encode(texts[k * SHARD:(k + 1) * SHARD], batch_size=batch, normalize_embeddings=True, convert_to_numpy=True)
        v = v.astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        np.save(d / "partial.npy", v)
        (d / "partial.npy").rename(path)
        print(f"{name} shard {k + 1}/{shards}: {len(v) / (time.time() - t0):.1f} sentences/s", flush=True)
        if after_shard:
            after_shard()


def packed_shard(k):
    return PACKED / f"shard-{k:05d}.npz"


def texts_digest(out):
    return hashlib.sha256((out / "texts.jsonl").read_bytes()).hexdigest()


def pack(out, lines):
    """Writes the packed form of every finished mpnet shard not packed yet (see the top)."""
    PACKED.mkdir(parents=True, exist_ok=True)
    digest, stamp = texts_digest(out), PACKED / "texts.sha256"
    if stamp.exists() and stamp.read_text().split()[0] != digest:
        raise SystemExit(f"{stamp}: packed for another sentence list than {out / 'texts.jsonl'}")
    stamp.write_text(f"{digest}  texts.jsonl\n")
    raw = out / "mpnet"
    proj = PACKED / "projection.npy"
    if not proj.exists():
        first = [raw / f"shard-{k:05d}.npy" for k in range(PCA_SHARDS)]
        if not all(p.exists() for p in first):
            print(f"pack: waiting for the first {PCA_SHARDS} shards to fit the projection", flush=True)
            return
        np.save(proj, pca(np.concatenate([np.load(p) for p in first]), 384).astype(np.float32))
    p = np.load(proj)
    for path in sorted(raw.glob("shard-*.npy")):
        k = int(path.stem.split("-")[1])
        if packed_shard(k).exists():
            continue
        v = np.load(path) @ p
        scale = np.abs(v).max(1, keepdims=True) / 127
        q = np.round(v / scale).astype(np.int8)
        cos = (normalise(q * scale) * normalise(v)).sum(1).min()
        tmp = PACKED / f"partial-{k:05d}.npz"
        np.savez(tmp, q=q, scale=scale[:, 0].astype(np.float32))
        tmp.rename(packed_shard(k))
        print(f"packed shard {k}: {len(q)} rows, min cosine to f32 {cos:.6f}", flush=True)
    done = len(list(PACKED.glob("shard-*.npz")))
    print(f"pack: {done} of {(lines + SHARD - 1) // SHARD} shards packed in {PACKED}", flush=True)


def packed_targets(out, lines):
    shards = (lines + SHARD - 1) // SHARD
    missing = [k for k in range(shards) if not packed_shard(k).exists()]
    if missing:
        raise SystemExit(f"{PACKED}: shards {missing} missing: run --teachers mpnet --pack first")
    if (PACKED / "texts.sha256").read_text().split()[0] != texts_digest(out):
        raise SystemExit(f"{PACKED}: packed for another sentence list than {out / 'texts.jsonl'}")
    parts = [np.load(packed_shard(k)) for k in range(shards)]
    return normalise(np.concatenate([z["q"] * z["scale"][:, None] for z in parts]))


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
        return packed_targets(out, lines)
    if kind == "concat":  # both teachers side by side, each half weighted equally
        return normalise(np.concatenate([teacher_vectors(out, "minilm", lines), teacher_vectors(out, "mpnet", lines)], 1))
    if kind == "both-pca384":
        both = both_halves(teacher_vectors(out, "minilm", lines), packed_targets(out, lines))
        return normalise(both @ pca(both[:SHARD * PCA_SHARDS], 384))
    raise SystemExit(f"unknown targets kind {kind}")


def both_halves(minilm, mpnet_pca384):
    """`both-pca384` before its projection: the old teacher's vectors beside the chosen targets,
    each half at weight 1/√2, so that the cosine of two rows is the mean of the two teachers'.
    The student (st5-small's descendants) already fits the first half; the second brings the
    stronger teacher. Projected on its own top 384 directions it scores 88.25 on STS-B dev as
    targets (mpnet-pca384: 88.15; weighting mpnet 0.6 or 0.7 gave 88.38 and 88.41, within the
    noise of a 1,500-pair set, and equal weights keep more of what st5-small fits)."""
    return normalise(np.concatenate([minilm, mpnet_pca384], 1))


def dev_report(out):
    """STS-B dev Spearman × 100 (overall and by genre) of each target kind, as a student that
    matched it exactly would score: the teachers embed the dev sentences, and each projection is
    the one the targets use (fitted on the first shard of training vectors)."""
    rows = [r for r in (line.rstrip("\n").split("\t") for line in open(DEV, encoding="utf-8")) if len(r) >= 7]
    y = np.array([float(r[4]) for r in rows])
    genre = np.array([r[0] for r in rows])
    dev = {}
    for name in teachers.TEACHERS:
        m = teachers.load(name)
        dev[name] = [m.encode([r[i] for r in rows], batch_size=64, normalize_embeddings=True, convert_to_numpy=True) for i in (5, 6)]
    # The committed projection: the one fitted on the first shard, which a new machine has only
    # in packed form.
    p = np.load(PACKED / "projection.npy")
    kinds = {
        "minilm": dev["minilm"],
        "mpnet": dev["mpnet"],
        "mpnet-pca384": [normalise(v @ p) for v in dev["mpnet"]],
        "concat": [normalise(np.concatenate([a, b], 1)) for a, b in zip(dev["minilm"], dev["mpnet"])],
    }
    both = [both_halves(a, b) for a, b in zip(dev["minilm"], kinds["mpnet-pca384"])]
    train = both_halves(np.load(out / "minilm" / "shard-00000.npy"), packed_targets(out, SHARD * PCA_SHARDS))
    q = pca(train, 384)
    kinds["both-pca384"] = [normalise(v @ q) for v in both]
    for kind, (a, b) in kinds.items():
        print(kind, scores(a, b, y, genre), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--teachers", default="", help="comma-separated teachers to embed with (minilm, mpnet)")
    ap.add_argument("--targets", default="", help="comma-separated target kinds to write (minilm, mpnet, mpnet-pca384, concat, both-pca384)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dev", action="store_true", help="score each target kind on STS-B dev")
    ap.add_argument("--pack", action="store_true", help="write the packed mpnet-pca384 shards (committed)")
    ap.add_argument("--bf16", action="store_true", help="embed with bf16 matrix products (see embed)")
    ap.add_argument("--split", type=int, default=1, help="also write the targets and sentences in N interleaved parts")
    args = ap.parse_args()
    out = Path(args.out)
    global PACKED
    PACKED = Path(os.environ.get("ST5_PACKED", out / "packed" / "mpnet-pca384"))
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "texts.jsonl").exists():
        write_texts(out)
    texts = read_texts(out)
    print(f"{len(texts)} sentences in {out / 'texts.jsonl'}", flush=True)
    import torch

    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    for name in filter(None, args.teachers.split(",")):
        after = (lambda: pack(out, len(texts))) if args.pack and name == "mpnet" else None
        embed(out, name, texts, args.batch, after, bf16=args.bf16)
    if args.pack:
        pack(out, len(texts))
    if args.dev:
        dev_report(out)
    for kind in filter(None, args.targets.split(",")):
        v = targets(out, kind, len(texts))
        save(out / f"targets-{kind}.npy", v)
        lines = (out / "texts.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        for k in range(args.split if args.split > 1 else 0):
            save(out / f"targets-{kind}-part{k}.npy", v[k :: args.split])
            tmp = out / f"texts-part{k}.tmp"
            tmp.write_text("".join(lines[k :: args.split]), encoding="utf-8")
            tmp.rename(out / f"texts-part{k}.jsonl")


def save(path, v):
    """np.save through a temporary name, so that an interrupted run leaves no half-written file."""
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, v)
    tmp.rename(path)
    print("wrote", path, v.shape, flush=True)


if __name__ == "__main__":
    main()
