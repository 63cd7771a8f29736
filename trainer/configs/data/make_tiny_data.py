"""Writes the tiny example datasets of trainer/configs/tiny.toml from ../shared/data/train.

- qa.jsonl: 256 question pairs from Disfl-QA train (CC BY 4.0; questions from SQuAD 2.0,
  CC BY-SA 4.0): {"anchor": disfluent question, "positive": original question}.
- nli.tsv: 256 triplets from the counterfactually augmented SNLI train split (Apache-2.0 +
  SNLI CC BY-SA 4.0): premise, an entailed hypothesis, a contradicted one.

    python3 trainer/configs/data/make_tiny_data.py
"""

import csv
import json
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN = HERE.parents[3] / "shared" / "data" / "train"

qa = json.loads((TRAIN / "disfl_qa" / "train.json").read_text())
with open(HERE / "qa.jsonl", "w") as f:
    for _, q in sorted(qa.items())[:256]:
        f.write(json.dumps({"anchor": q["disfluent"], "positive": q["original"]}) + "\n")

by_premise = defaultdict(dict)
with open(TRAIN / "cad_snli" / "all_combined" / "train.tsv") as f:
    for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
        by_premise[row["sentence1"]].setdefault(row["gold_label"], row["sentence2"])
with open(HERE / "nli.tsv", "w") as f:
    f.write("premise\tentailment\tcontradiction\n")
    n = 0
    for premise, hyps in sorted(by_premise.items()):
        if "entailment" in hyps and "contradiction" in hyps and n < 256:
            f.write(f"{premise}\t{hyps['entailment']}\t{hyps['contradiction']}\n")
            n += 1
print("wrote", HERE)
