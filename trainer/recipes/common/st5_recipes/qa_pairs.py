"""Stage 1 of the paper's recipe (question-answer and paraphrase pairs, in-batch negatives), from
../shared/data/train, one JSON Lines file per source (`anchor`, `positive`):

- wikiqa, selqa, stackexchange: the training splits of the retrieval tuning sets only
  (`retrieval_sets.train_pairs`): no dev or test query of a tuning set is trained on;
- rqe: consumer health question → FAQ question, pairs labelled true (RQE train, CC BY 4.0);
- parasci: ParaSCI-ACL train, source → paraphrase (scientific sentences);
- twitter: Twitter URL corpus train, pairs labelled 1 (paraphrase);
- captions: two captions of one image (COCO val2017, Flickr8k train images, Multi30k train).

No held-out retrieval test set is read here. The trainer also drops any pair with a text in an
evaluation test split (STS, SICK).

    python -m st5_recipes.qa_pairs --out "$ST5_DATA/qa"
"""

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from st5_recipes.retrieval_sets import TRAIN, clean, train_pairs


def rqe():
    for pair in ET.parse(TRAIN / "rqe_medical" / "RQE_Train_8588_AMIA2016.xml").getroot().iter("pair"):
        if pair.get("value") == "true":
            yield pair.findtext("chq") or "", pair.findtext("faq") or ""


def parasci():
    d = TRAIN / "parasci" / "ParaSCI-ACL" / "train"
    src, tgt = ((d / f).read_text(encoding="utf-8").splitlines() for f in ["train.src", "train.tgt"])
    yield from zip(src, tgt)


def twitter():
    d = TRAIN / "twitter_url_corpus" / "train"
    a, b, sim = ((d / f).read_text(encoding="utf-8").splitlines() for f in ["a.toks", "b.toks", "sim.txt"])
    yield from ((x, y) for x, y, s in zip(a, b, sim) if s.strip() == "1")


def captions():
    groups = defaultdict(list)
    coco = json.loads((TRAIN / "coco_captions_val2017" / "captions_val2017.json").read_text())
    for c in coco["annotations"]:
        groups[f"coco{c['image_id']}"].append(c["caption"])
    keep = set((TRAIN / "flickr8k" / "Flickr_8k.trainImages.txt").read_text().split())
    for line in (TRAIN / "flickr8k" / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines():
        image, _, text = line.partition("\t")
        if image.split("#")[0] in keep:
            groups[f"f8k{image.split('#')[0]}"].append(text)
    d = TRAIN / "multi30k_flickr30k_captions"
    cols = [(d / f"train.{i}.en").read_text(encoding="utf-8").splitlines() for i in range(1, 6)]
    for i, row in enumerate(zip(*cols)):
        groups[f"m30k{i}"] += row
    for caps in groups.values():
        if len(caps) >= 2:
            yield caps[0], caps[1]


def write(out, name, pairs):
    """out/name.jsonl: each anchor once, no empty or identical pair."""
    seen, n = set(), 0
    with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
        for anchor, positive in pairs:
            anchor, positive = clean(anchor), clean(positive)
            if len(anchor) < 3 or len(positive) < 3 or anchor == positive or anchor in seen:
                continue
            seen.add(anchor)
            n += 1
            f.write(json.dumps({"anchor": anchor, "positive": positive}, ensure_ascii=False) + "\n")
    print(name, n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sources = {
        "wikiqa": lambda: train_pairs("wikiqa"),
        "selqa": lambda: train_pairs("selqa"),
        "stackexchange": lambda: train_pairs("stackexchange_small"),
        "rqe": rqe,
        "parasci": parasci,
        "twitter": twitter,
        "captions": captions,
    }
    for name, pairs in sources.items():
        write(args.out, name, pairs())


if __name__ == "__main__":
    main()
