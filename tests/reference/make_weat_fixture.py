"""Writes tests/fixtures/eval/weat.json: WEAT effect sizes and exact one-sided permutation
p-values computed the way SEAT's `sentbias/weat.py` (W4ngatang/sent-bias @ e3559fb6) does, on
random vectors with a planted association (and one without), for `st5_eval::bias` to match.
numpy only (pinned in requirements.txt):

    /tmp/st5-ref/bin/python tests/reference/make_weat_fixture.py
"""
import itertools
import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "weat.json"


def cos(u, v):
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def s_wab(w, a, b):
    return np.mean([cos(w, x) for x in a]) - np.mean([cos(w, x) for x in b])


def weat(x, y, a, b):
    sx = np.array([s_wab(w, a, b) for w in x])
    sy = np.array([s_wab(w, a, b) for w in y])
    d = (sx.mean() - sy.mean()) / np.concatenate([sx, sy]).std(ddof=1)
    # SEAT's exact test: every |X|-subset of X ∪ Y as Xi, strictly greater statistics counted.
    s_all = np.concatenate([sx, sy])
    observed = sx.sum() - sy.sum()
    idx = range(len(s_all))
    greater = total = 0
    for xi in itertools.combinations(idx, len(x)):
        yi = [i for i in idx if i not in set(xi)]
        if s_all[list(xi)].sum() - s_all[yi].sum() > observed:
            greater += 1
        total += 1
    return float(d), greater / total, total


def main():
    rng = np.random.default_rng(11)
    cases = []
    for name, n_t, n_a, dim, strength in [
        ("planted", 8, 8, 16, 0.6),
        ("planted-weak", 7, 5, 24, 0.04),
        ("null", 8, 6, 16, 0.0),
    ]:
        direction = rng.normal(0, 1, dim)
        a = rng.normal(0, 1, (n_a, dim)) + direction
        b = rng.normal(0, 1, (n_a, dim)) - direction
        x = rng.normal(0, 1, (n_t, dim)) + strength * direction
        y = rng.normal(0, 1, (n_t, dim)) - strength * direction
        x, y, a, b = (m.astype(np.float32) for m in (x, y, a, b))
        d, p, partitions = weat(x.astype(np.float64), y.astype(np.float64), a.astype(np.float64), b.astype(np.float64))
        cases.append({
            "name": name, "dim": dim,
            "x": x.ravel().tolist(), "y": y.ravel().tolist(), "a": a.ravel().tolist(), "b": b.ravel().tolist(),
            "effect_size": d, "p_value": p, "partitions": partitions,
        })
    OUT.write_text(json.dumps(cases))
    for c in cases:
        print(c["name"], c["effect_size"], c["p_value"], c["partitions"])


if __name__ == "__main__":
    main()
