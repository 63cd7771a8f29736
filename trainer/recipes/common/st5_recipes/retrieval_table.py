"""Markdown rows from `st5 eval --json` files: nDCG@10 ×100 of each BEIR task (by directory and
split), STS-B dev or test and Avg7 where the run measured them, one row a file.

    python -m st5_recipes.retrieval_table --splits dev NAME=eval.json ...
"""

import argparse
import json
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="NAME=FILE (st5 eval --json)")
    ap.add_argument("--splits", default="dev,test", help="which splits' columns, in order")
    ap.add_argument("--metric", default="ndcg_at_10")
    args = ap.parse_args()
    splits = args.splits.split(",")
    rows, head = [], None
    for spec in args.runs:
        name, _, path = spec.partition("=")
        r = json.loads(Path(path).read_text())
        sts = {s["name"]: s["all"] for s in r.get("sts", [])}
        cells = {label: sts[k] for k, label in [("stsb-dev", "STS-B dev"), ("stsb", "STS-B test")] if k in sts}
        if r.get("avg7") is not None:
            cells["Avg7"] = r["avg7"]
        # The BEIR tasks by split, in the order asked, each in the order the run named them.
        for split in splits:
            for t in r.get("beir", []):
                if t["split"] == split:
                    d = t["name"].removeprefix("retrieval:").removesuffix("@" + split)
                    cells[f"{Path(d).name} {split}"] = 100 * t[args.metric]
        keys = list(cells)
        head = head or keys
        rows.append(f"| {name} | " + " | ".join(f"{cells[k]:.2f}" if k in cells else "—" for k in head) + " |")
    print("| model | " + " | ".join(head) + " |\n|" + "---|" * (len(head) + 1))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
