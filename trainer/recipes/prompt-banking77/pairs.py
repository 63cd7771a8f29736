"""Banking77 same-intent query pairs for prompt tuning (standard library only).

Reads shared/data/train/banking77/train.csv, leaves out the dev records (record i, 0-based,
with i % 10 == 9: st5_eval::tasks::is_dev_record, which `st5 eval --tasks banking77-dev`
scores) and writes one JSON line per remaining query: the query as anchor and another query
of the same intent, drawn with a fixed seed, as positive, and the intent (the trainer's `group`:
no two queries of one intent share a batch, so no in-batch negative is a false one). The test
split is never read.

    python3 trainer/recipes/prompt-banking77/pairs.py --data ../shared/data --out target/prompt-banking77/pairs.jsonl
"""

import argparse
import csv
import json
import random
from collections import defaultdict
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--data", type=Path, required=True)
ap.add_argument("--out", type=Path, required=True)
ap.add_argument("--seed", type=int, default=1)
args = ap.parse_args()

with open(args.data / "train" / "banking77" / "train.csv", newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
train = [(r["text"], r["category"]) for i, r in enumerate(rows) if i % 10 != 9]
by_intent = defaultdict(list)
for text, intent in train:
    by_intent[intent].append(text)
rng = random.Random(args.seed)
args.out.parent.mkdir(parents=True, exist_ok=True)
with open(args.out, "w", encoding="utf-8") as out:
    for text, intent in train:
        others = [t for t in by_intent[intent] if t != text]
        if others:
            out.write(json.dumps({"anchor": text, "positive": rng.choice(others), "intent": intent}) + "\n")
print(f"{len(rows)} train records, {len(train)} outside dev, {len(by_intent)} intents -> {args.out}")
