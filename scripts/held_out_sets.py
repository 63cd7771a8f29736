"""The two held-out retrieval test sets, in BEIR's layout (`st5 eval --tasks retrieval:DIR`), from
../shared/data/train. They are the test reported once at the end: nothing trains on them and
no model, weight or setting is chosen by them, which is why this script lives outside the
training recipes (whose tuning sets are `st5_recipes.retrieval_sets`, whose writer it reuses).

- medquad: a MedQuAD sample, 3,000 question-answer pairs chosen by a stable hash of question and
  answer; every answer is in the corpus and every fifth pair's question (598 distinct) a query;
- qed_nq: QED's Natural Questions dev queries → their Wikipedia paragraph; the corpus is every
  distinct paragraph.

    pip install --no-deps -e trainer/recipes/common
    python3 scripts/held_out_sets.py --out "$ST5_DATA/held-out"
"""

import argparse
import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from st5_recipes.retrieval_sets import TRAIN, build, clean


def medquad():
    pairs = set()
    for path in sorted(TRAIN.glob("medquad/*/*.xml")):
        for qa in ET.parse(path).getroot().iter("QAPair"):
            q, a = clean(qa.findtext("Question")), clean(qa.findtext("Answer"))
            if q and a:
                pairs.add((hashlib.sha1(f"{q}\t{a}".encode()).hexdigest(), q, a))
    pairs = sorted(pairs)[:3000]
    return [a for _, _, a in pairs], [("test", q, [(a, True)]) for _, q, a in pairs[::5]]


def qed():
    with open(TRAIN / "qed_nq" / "qed-dev.jsonlines", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [], [("test", " ".join(r["question_text"].split()), [(" ".join(r["paragraph_text"].split()), True)]) for r in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    for name, source in {"medquad": medquad, "qed_nq": qed}.items():
        build(name, source, args.out / name)


if __name__ == "__main__":
    main()
