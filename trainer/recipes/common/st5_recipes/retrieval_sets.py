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

[`train_pairs`] gives each set's training split, for the stage-1 recipe; no dev or test query
ever enters it.

`--held-out` writes the two held-out test sets instead (test qrels only). They are for the
report made once at the end: never train on them, and never choose a model, a weight or a
setting by them.
- medquad: a MedQuAD sample, 3,000 question-answer pairs chosen by a stable hash of the
  question and answer; every answer is in the corpus, and 600 of the questions (by the same
  hash) are the queries;
- qed_nq: QED's Natural Questions dev queries → their Wikipedia paragraph; the corpus is every
  distinct paragraph.

    python -m st5_recipes.retrieval_sets --out "$ST5_DATA/retrieval"
    python -m st5_recipes.retrieval_sets --held-out --out "$ST5_DATA/held-out"
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
SETS = ["wikiqa", "selqa", "stackexchange_small"]


def split(key, train=6, dev=2):
    """train / dev / test by a stable hash of `key` (SHA-1 mod 10): the same on every machine."""
    h = int(hashlib.sha1(key.encode("utf-8")).hexdigest(), 16) % 10
    return "train" if h < train else "dev" if h < train + dev else "test"


def clean(text):
    """HTML tags and entities removed, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(text or "")).split())


def wikiqa():
    """(split, question, [(candidate, relevant)]) for every WikiQA question."""
    for part in ["train", "dev", "test"]:
        d = TRAIN / "wikiqa" / part
        a, b, ids, sim = ((d / f).read_text(encoding="utf-8").splitlines() for f in ["a.toks", "b.toks", "id.txt", "sim.txt"])
        by_q = {}
        for q, c, i, s in zip(a, b, ids, sim):
            by_q.setdefault((i, q), []).append((c.strip(), s.strip() == "1"))
        for (i, q), cands in by_q.items():
            yield part, q.strip(), cands


def selqa():
    for name, part in [("selqa-ass-dev.json", "train"), ("selqa-ass-test.json", None)]:
        for r in json.loads((TRAIN / "selqa" / name).read_text(encoding="utf-8")):
            q = " ".join(r["question"].split())
            cands = [(" ".join(c.split()), i in r["answers"]) for i, c in enumerate(r["candidates"])]
            yield part or ("dev" if split(q, 0, 5) == "dev" else "test"), q, cands


def stackexchange():
    for site in ["beer", "coffee"]:
        rows = list(ET.parse(TRAIN / "stackexchange_small" / f"{site}.stackexchange.com" / "Posts.xml").getroot())
        answers = [r for r in rows if r.get("PostTypeId") == "2"]
        accepted = {r.get("AcceptedAnswerId") for r in rows if r.get("PostTypeId") == "1"}
        cands = [(clean(r.get("Body")), r.get("Id") in accepted, r.get("ParentId"), f"{site}-{r.get('Id')}") for r in answers]
        for r in rows:
            if r.get("PostTypeId") != "1" or not r.get("AcceptedAnswerId"):
                continue
            q = clean(r.get("Title")) + " " + clean(r.get("Body"))
            if not any(c[3] == f"{site}-{r.get('AcceptedAnswerId')}" for c in cands):
                continue
            mine = [(c[0], c[3] == f"{site}-{r.get('AcceptedAnswerId')}") for c in cands if c[2] == r.get("Id")]
            yield split(f"{site}-{r.get('Id')}"), q.strip(), mine, [c[0] for c in cands]


def records(name):
    """(split, query, [(candidate, relevant)], corpus texts beyond the candidates)."""
    if name in HELD_OUT:
        yield from HELD_OUT[name]()
    elif name == "stackexchange_small":
        yield from stackexchange()
    else:
        for part, q, cands in (wikiqa() if name == "wikiqa" else selqa()):
            yield part, q, cands, []


def train_pairs(name):
    """(query, relevant text) pairs of the set's training split only (never a held-out set's)."""
    assert name in SETS, f"{name} is held out"
    for part, q, cands, _ in records(name):
        if part == "train":
            yield from ((q, c) for c, rel in cands if rel and c)


def build(name, out):
    docs, queries, qrels = {}, {}, {"dev": [], "test": []}

    def doc_id(text):
        if text not in docs:
            docs[text] = f"d{len(docs)}"
        return docs[text]

    for part, q, cands, extra in records(name):
        for text in extra:
            if text:
                doc_id(text)
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


def medquad():
    pairs = []
    for path in sorted(TRAIN.glob("medquad/*/*.xml")):
        for qa in ET.parse(path).getroot().iter("QAPair"):
            q, a = clean(qa.findtext("Question")), clean(qa.findtext("Answer"))
            if q and a:
                pairs.append((hashlib.sha1(f"{q}\t{a}".encode()).hexdigest(), q, a))
    pairs = sorted(set(pairs))[:3000]
    answers = [a for _, _, a in pairs]
    for i, (_, q, a) in enumerate(pairs):
        yield ("test" if i % 5 == 0 else "corpus only"), q, [(a, True)], answers


def qed():
    with open(TRAIN / "qed_nq" / "qed-dev.jsonlines", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            yield "test", " ".join(r["question_text"].split()), [(" ".join(r["paragraph_text"].split()), True)], []


HELD_OUT = {"medquad": medquad, "qed_nq": qed}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--held-out", action="store_true", help="the held-out test sets instead")
    args = ap.parse_args()
    for name in ["medquad", "qed_nq"] if args.held_out else SETS:
        build(name, args.out / name)


if __name__ == "__main__":
    main()
