"""BM25 golden scores from bm25s (the reference of issue 58), for tests/search.rs.

    python3 -m venv /var/tmp/bm25venv && /var/tmp/bm25venv/bin/pip install bm25s==0.3.16 pystemmer==3.1.0
    /var/tmp/bm25venv/bin/python tests/reference/make_bm25_fixture.py

A seeded synthetic corpus (English words of two or more letters, inflected forms and stop words
among them, Zipf-like frequencies, documents of 0 to 60 words) and queries, so that bm25s's
tokenizer (`(?u)\\b\\w\\w+\\b`, lower-cased, Lucene's English stop words, Snowball English) and
st5's (UAX #29 words, the same stop words and stemmer) see the same terms. bm25s scores with
method "lucene", k1 = 1.2, b = 0.75. Writes tests/fixtures/bm25-golden.json: the texts, each
text's bm25s tokens, and every query's scores over all documents.
"""
import json
import random
from pathlib import Path

import bm25s
import Stemmer

ROOT = Path(__file__).resolve().parents[2]
WORDS = """the a of and to in is it that for on with as was at by be this are or an not but
they their there these then such into if no will
search searching searched searches searcher index indexes indexed indexing document documents
model models modeling vector vectors query queries querying rank ranking ranked ranks
house houses housing run runs running runner cat cats dog dogs play playing played player
guitar guitars music musical river rivers bank banks banking money market markets marketing
paris france french capital city cities train trains training trained network networks
happy happiness happily quick quickly quickest fox foxes jump jumps jumped jumping lazy
generalization generalize general generally connect connection connections connected
relational relate relation relativity study studies studying studied""".split()


def main():
    rng = random.Random(58)
    weights = [1.0 / (i + 1) ** 0.8 for i in range(len(WORDS))]
    docs = []
    for i in range(300):
        n = 0 if i % 97 == 5 else rng.randint(1, 60)
        words = rng.choices(WORDS, weights, k=n)
        # Capitals and punctuation that both tokenizers drop or fold.
        text = " ".join(w.capitalize() if rng.random() < 0.1 else w for w in words)
        docs.append(text.replace(" the ", ", the ", 1) + ("." if n else ""))
    queries = [" ".join(rng.choices(WORDS, k=rng.randint(1, 5))) for _ in range(40)]
    queries += ["search search index", "the of and", "Running houses"]
    stemmer = Stemmer.Stemmer("english")
    tok = lambda texts: bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    retriever.index(bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    query_tokens = tok(queries)
    scores = []
    for q in query_tokens:
        known = [t for t in q if t in retriever.vocab_dict]
        s = retriever.get_scores(known) if known else [0.0] * len(docs)
        scores.append([float(x) for x in s])
    out = {
        "reference": f"bm25s {bm25s.__version__} method=lucene k1=1.2 b=0.75, stopwords=en, PyStemmer english",
        "docs": docs,
        "doc_tokens": tok(docs),
        "queries": queries,
        "query_tokens": query_tokens,
        "scores": scores,
    }
    path = ROOT / "tests/fixtures/bm25-golden.json"
    path.write_text(json.dumps(out, indent=None) + "\n")
    print(f"wrote {path} ({len(docs)} documents, {len(queries)} queries)")


if __name__ == "__main__":
    main()
