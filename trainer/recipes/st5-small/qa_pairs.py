"""Question-answer and paraphrase pairs under permissive licences, one JSON Lines file per source,
for run Q of levers.toml: a contrastive stage before NLI, the paper's stage 1 (community QA) at
the scale of what ../shared/data/train holds. MedQuAD (question, first two answer sentences),
RQE (consumer question, FAQ; pairs labelled true), Stack Exchange beer/coffee (title, first two
sentences of the accepted answer), QED (Natural Questions query, selected sentence), Disfl-QA
(disfluent, original question), WikiSplit tune/validation (sentence, its split form).

    python3 trainer/recipes/st5-small/qa_pairs.py target/st5-small-qa
"""
import html
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TRAIN = Path(__file__).resolve().parents[4] / "shared" / "data" / "train"
OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)


def sents(text):
    """Sentences of a paragraph, whitespace collapsed: split after . ? ! before a capital."""
    return re.split(r"(?<=[.?!]) (?=[A-Z])", " ".join(text.split()))


def clean(text):
    """HTML tags and entities removed, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(text or "")).split())


def write(name, pairs):
    """OUT/name.jsonl: each anchor once, no empty or identical pair."""
    seen, n = set(), 0
    with open(OUT / f"{name}.jsonl", "w") as f:
        for anchor, positive in pairs:
            anchor, positive = clean(anchor), clean(positive)
            if len(anchor) < 3 or len(positive) < 3 or anchor == positive or anchor in seen:
                continue
            seen.add(anchor)
            n += 1
            f.write(json.dumps({"anchor": anchor, "positive": positive}) + "\n")
    print(name, n)


def medquad():  # CC BY 4.0
    for path in sorted(TRAIN.glob("medquad/*/*.xml")):
        for qa in ET.parse(path).getroot().iter("QAPair"):
            answer = qa.findtext("Answer") or ""
            if answer.strip():
                yield qa.findtext("Question") or "", " ".join(sents(clean(answer))[:2])


def rqe():  # CC BY 4.0
    for pair in ET.parse(TRAIN / "rqe_medical" / "RQE_Train_8588_AMIA2016.xml").getroot().iter("pair"):
        if pair.get("value") == "true":
            yield pair.findtext("chq") or "", pair.findtext("faq") or ""


def stackexchange():  # CC BY-SA 3.0
    for site in ["beer", "coffee"]:
        rows = list(ET.parse(TRAIN / "stackexchange_small" / f"{site}.stackexchange.com" / "Posts.xml").getroot())
        by_id = {r.get("Id"): r for r in rows}
        for r in rows:
            accepted = r.get("AcceptedAnswerId")
            if r.get("Title") and accepted in by_id:
                yield r.get("Title"), " ".join(sents(clean(by_id[accepted].get("Body")))[:2])


def qed():  # CC BY-SA 3.0
    with open(TRAIN / "qed_nq" / "qed-dev.jsonlines") as f:
        for line in f:
            r = json.loads(line)
            s = r.get("annotation", {}).get("selected_sentence")
            if s and s.get("string"):
                yield r["question_text"], s["string"]


def disfl_qa():  # CC BY 4.0
    for q in json.loads((TRAIN / "disfl_qa" / "train.json").read_text()).values():
        yield q["disfluent"], q["original"]


def wikisplit():  # CC BY-SA 4.0 (test.tsv is not used)
    for split in ["tune.tsv", "validation.tsv"]:
        with open(TRAIN / "wikisplit" / split, encoding="utf-8") as f:
            for line in f:
                cells = line.rstrip("\n").split("\t")
                if len(cells) == 2:
                    yield cells[0], cells[1].replace(" <::::> ", " ")


for source in [medquad, rqe, stackexchange, qed, disfl_qa, wikisplit]:
    write(source.__name__, source())
