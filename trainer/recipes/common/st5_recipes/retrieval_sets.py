"""The retrieval tuning sets, in BEIR's layout, from ../shared/data/train: what `st5 eval --tasks
retrieval:DIR` (dev queries: `retrieval:DIR@dev`) measures a model by when choosing it. Each set
is a directory with `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`) and
`qrels/{dev,test}.tsv` (`query-id`, `corpus-id`, `score`, with a header line).

- wikiqa: WikiQA questions (dev and test splits, official) → Wikipedia sentences; the corpus is
  every question's candidate sentences (train, dev and test), deduplicated.
- selqa: SelQA answer-selection questions → Wikipedia sentences. Its train split is not in
  shared/data, so `selqa-ass-dev.json` is the training split (its positives may be trained on)
  and `selqa-ass-test.json`'s questions are halved into dev and test by [`split`]; the corpus is
  every question's candidates, deduplicated.
- stackexchange_small: a beer or coffee question (title, then the body's text) → its accepted
  answer; the corpus is every answer of both sites. Questions with an accepted answer are cut
  into train / dev / test (6 : 2 : 2) by [`split`].

Each source gives the corpus texts beyond its candidates and its records, `(split, query,
[(candidate, relevant)])`; [`build`] writes any such source (the held-out test sets are built by
`scripts/held_out_sets.py` with it, outside the recipes).

[`train_pairs`] gives each set's training split, for the stage-1 recipe; no dev or test query
ever enters it.

    python -m st5_recipes.retrieval_sets --out "$ST5_DATA/retrieval"
"""

import argparse
import hashlib
import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
TRAIN = ROOT.parent / "shared" / "data" / "train"


def split(key, train=6, dev=2):
    """train / dev / test by a stable hash of `key` (SHA-1 mod 10): the same on every machine."""
    h = int(hashlib.sha1(key.encode("utf-8")).hexdigest(), 16) % 10
    return "train" if h < train else "dev" if h < train + dev else "test"


def clean(text):
    """HTML tags and entities removed, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(text or "")).split())


def wikiqa_records():
    for part in ["train", "dev", "test"]:
        d = TRAIN / "wikiqa" / part
        a, b, ids, sim = ((d / f).read_text(encoding="utf-8").splitlines() for f in ["a.toks", "b.toks", "id.txt", "sim.txt"])
        by_q = {}
        for q, c, i, s in zip(a, b, ids, sim):
            by_q.setdefault((i, q), []).append((c.strip(), s.strip() == "1"))
        for (i, q), cands in by_q.items():
            yield part, q.strip(), cands


def wikiqa():
    return [], wikiqa_records()


def selqa_records():
    for name, part in [("selqa-ass-dev.json", "train"), ("selqa-ass-test.json", None)]:
        for r in json.loads((TRAIN / "selqa" / name).read_text(encoding="utf-8")):
            q = " ".join(r["question"].split())
            cands = [(" ".join(c.split()), i in r["answers"]) for i, c in enumerate(r["candidates"])]
            yield part or ("dev" if split(q, 0, 5) == "dev" else "test"), q, cands


def selqa():
    return [], selqa_records()


def stackexchange():
    corpus, records = [], []
    for site in ["beer", "coffee"]:
        rows = list(ET.parse(TRAIN / "stackexchange_small" / f"{site}.stackexchange.com" / "Posts.xml").getroot())
        answers = {r.get("Id"): r for r in rows if r.get("PostTypeId") == "2"}
        corpus += [clean(r.get("Body")) for r in answers.values()]
        for r in rows:
            accepted = r.get("AcceptedAnswerId")
            if r.get("PostTypeId") != "1" or accepted not in answers:
                continue
            q = clean(r.get("Title")) + " " + clean(r.get("Body"))
            mine = [(clean(a.get("Body")), i == accepted) for i, a in answers.items() if a.get("ParentId") == r.get("Id")]
            records.append((split(f"{site}-{r.get('Id')}"), q.strip(), mine))
    return corpus, records


SOURCES = {"wikiqa": wikiqa, "selqa": selqa, "stackexchange_small": stackexchange}


def train_pairs(name):
    """(query, relevant text) pairs of a tuning set's training split only."""
    for part, q, cands in SOURCES[name]()[1]:
        if part == "train":
            yield from ((q, c) for c, rel in cands if rel and c)


def build(name, source, out):
    """Writes `source` (`() -> (corpus texts, records)`) as a BEIR directory `out`; records of
    other splits than dev and test (training) judge nothing, but their candidates are documents."""
    docs, queries, qrels = {}, {}, {"dev": [], "test": []}

    def doc_id(text):
        if text not in docs:
            docs[text] = f"d{len(docs)}"
        return docs[text]

    extra, records = source()
    for text in extra:
        if text:
            doc_id(text)
    for part, q, cands in records:
        ids = [(doc_id(c), rel) for c, rel in cands if c]
        if part not in qrels or not any(rel for _, rel in ids):
            continue
        qid = queries.setdefault(q, f"q{len(queries)}")
        qrels[part] += [(qid, d) for d, rel in ids if rel]
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for text, i in docs.items():
            f.write(json.dumps({"_id": i, "title": "", "text": text}, ensure_ascii=False) + "\n")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as f:
        for text, i in queries.items():
            f.write(json.dumps({"_id": i, "text": text}, ensure_ascii=False) + "\n")
    for part, rows in qrels.items():
        with open(out / "qrels" / f"{part}.tsv", "w", encoding="utf-8") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for qid, d in dict.fromkeys(rows):
                f.write(f"{qid}\t{d}\t1\n")
    n = {p: len({q for q, _ in r}) for p, r in qrels.items()}
    print(f"{name}: {len(docs)} documents, {n['dev']} dev and {n['test']} test queries")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    for name, source in SOURCES.items():
        build(name, source, args.out / name)


if __name__ == "__main__":
    main()
