"""NLI triplets for st5-mini's optional contrastive stage (the paper's stage 2): premise, an
entailed hypothesis (positive) and a contradicted one (hard negative), from training data under
permissive licences. The trainer drops any triplet with a text in an evaluation test split.

- cad_snli/all_combined/train.tsv (Apache-2.0 + SNLI CC BY-SA 4.0);
- esnli_snli_dev (SNLI dev: MIT explanations, SNLI CC BY-SA 4.0; SNLI test is not used);
- taxinli/taxinli10k.tsv (MIT + MultiNLI licences), minus the pairs in ../shared/data/mnli_subset
  as SOURCES.md asks.

    python -m st5_recipes.nli --out target/st5-mini-data/nli.jsonl
"""

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
DATA = ROOT.parent / "shared" / "data"
TRAIN = DATA / "train"


def mnli_subset_texts():
    texts = set()
    for p in (DATA / "mnli_subset").rglob("*"):
        if p.is_file():
            for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
                texts.update(cell.strip() for cell in line.split("\t") if len(cell.strip()) > 20)
    return texts


def pairs():
    with open(TRAIN / "cad_snli" / "all_combined" / "train.tsv", newline="") as f:
        # Quoted CSV-style inside the TSV ("" for a quote).
        for r in csv.DictReader(f, delimiter="\t"):
            yield r["sentence1"], r["sentence2"], r["gold_label"]
    d = TRAIN / "esnli_snli_dev"
    s1, s2, lab = (p.read_text().splitlines() for p in (d / "s1.dev", d / "s2.dev", d / "labels.dev"))
    yield from ((a.strip(), b.strip(), l.strip()) for a, b, l in zip(s1, s2, lab))
    skip = mnli_subset_texts()
    with open(TRAIN / "taxinli" / "taxinli10k.tsv", newline="") as f:
        # MultiNLI text is quoted CSV-style inside the TSV ("" for a quote).
        for r in csv.DictReader(f, delimiter="\t"):
            if r["prem"].strip() not in skip and r["hyp"].strip() not in skip:
                yield r["prem"], r["hyp"], r["label"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "target" / "st5-mini-data" / "nli.jsonl"))
    args = ap.parse_args()
    by_premise = defaultdict(lambda: defaultdict(list))
    for premise, hyp, label in pairs():
        by_premise[" ".join(premise.split())][label].append(" ".join(hyp.split()))
    n = 0
    with open(args.out, "w") as f:
        for premise, hyps in sorted(by_premise.items()):
            for pos, neg in zip(hyps["entailment"], hyps["contradiction"]):
                f.write(json.dumps({"anchor": premise, "positive": pos, "negative": neg}) + "\n")
                n += 1
    print(f"wrote {n} triplets to {args.out}")


if __name__ == "__main__":
    main()
