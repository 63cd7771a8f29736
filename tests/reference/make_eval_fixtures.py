"""Writes tests/fixtures/eval/{spearman,logreg}.json with scipy and scikit-learn (pinned in
requirements.txt): Spearman with ties, and L2 logistic regression (binary and multinomial) on
small synthetic problems.

    /tmp/st5-ref/bin/python tests/reference/make_eval_fixtures.py
"""
import json
from pathlib import Path

import numpy as np
import scipy.stats
from sklearn.linear_model import LogisticRegression

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "eval"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    cases = []
    for n, levels in [(10, 3), (57, 6), (200, 4), (500, 1000)]:
        x = rng.integers(0, levels, n).astype(float)  # heavy ties on x
        y = np.round(x + rng.normal(0, 1.5, n), 1)     # some ties on y
        cases.append({"x": x.tolist(), "y": y.tolist(), "spearman": float(scipy.stats.spearmanr(x, y).correlation)})
    (OUT / "spearman.json").write_text(json.dumps(cases))

    problems = []
    for classes, c in [(2, 0.5), (3, 2.0), (6, 0.25)]:
        d, n_train, n_test = 6, 300, 200
        centers = rng.normal(0, 1.0, (classes, d))
        def sample(n):
            y = rng.integers(0, classes, n)
            return (centers[y] + rng.normal(0, 1.3, (n, d))).astype(np.float32), y
        xtr, ytr = sample(n_train)
        xte, yte = sample(n_test)
        clf = LogisticRegression(C=c, solver="lbfgs", max_iter=10000, tol=1e-10).fit(xtr, ytr)
        pred = clf.predict(xte)
        problems.append({
            "classes": classes, "c": c, "d": d,
            "x_train": xtr.ravel().tolist(), "y_train": ytr.tolist(),
            "x_test": xte.ravel().tolist(), "y_test": yte.tolist(),
            "predictions": pred.tolist(), "accuracy": float((pred == yte).mean()),
        })
    (OUT / "logreg.json").write_text(json.dumps(problems))


if __name__ == "__main__":
    main()
