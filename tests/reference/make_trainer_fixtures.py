"""Reference values for the trainer's loss and optimiser, from PyTorch (pinned in requirements.txt).

Writes tests/fixtures/trainer/:
- loss.json: for fixed embeddings, the Sentence-T5 contrastive loss (in-batch softmax
  cross-entropy over cosine similarity / tau, tau = 0.01) with and without hard negatives,
  symmetric or not, and its gradient with respect to every embedding. The one-directional loss
  is sentence-transformers' MultipleNegativesRankingLoss with scale 1/tau; the symmetric one
  averages it with the positive-to-anchor direction (MultipleNegativesSymmetricRankingLoss).
- adafactor.json: three steps of transformers.optimization.Adafactor as the paper configures
  it (constant lr 1e-3, no relative step, no parameter scaling) on a matrix and a vector.

    python tests/reference/make_trainer_fixtures.py
"""

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers.optimization import Adafactor

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "trainer"
TAU = 0.01


def contrastive(a, p, n, symmetric):
    """Cross-entropy of each anchor against [positives; negatives], the positive on the diagonal."""
    cand = p if n is None else torch.cat([p, n])
    scores = F.normalize(a, dim=-1) @ F.normalize(cand, dim=-1).T / TAU
    labels = torch.arange(a.shape[0])
    loss = F.cross_entropy(scores, labels)
    if symmetric:
        back = F.normalize(p, dim=-1) @ F.normalize(a, dim=-1).T / TAU
        loss = (loss + F.cross_entropy(back, labels)) / 2
    return loss


def loss_cases():
    g = torch.Generator().manual_seed(0)
    b, d = 5, 8
    base = {k: torch.randn(b, d, generator=g, dtype=torch.float64) for k in ("anchors", "positives", "negatives")}
    # Positives and hard negatives both near their anchors, so the loss is neither saturated nor
    # uniform at tau = 0.01.
    base["positives"] = base["anchors"] + 1.5 * base["positives"]
    base["negatives"] = base["anchors"] + 1.5 * base["negatives"]
    cases = []
    for negatives in (False, True):
        for symmetric in (False, True):
            t = {k: v.clone().requires_grad_(True) for k, v in base.items()}
            loss = contrastive(t["anchors"], t["positives"], t["negatives"] if negatives else None, symmetric)
            loss.backward()
            case = {
                "negatives": negatives,
                "symmetric": symmetric,
                "loss": loss.item(),
                "grad_anchors": t["anchors"].grad.tolist(),
                "grad_positives": t["positives"].grad.tolist(),
            }
            if negatives:
                case["grad_negatives"] = t["negatives"].grad.tolist()
            cases.append(case)
    return {"temperature": TAU, **{k: v.tolist() for k, v in base.items()}, "cases": cases}


def adafactor_case():
    g = torch.Generator().manual_seed(1)
    params = {"matrix": torch.randn(4, 6, generator=g), "vector": torch.randn(5, generator=g)}
    tensors = {k: torch.nn.Parameter(v.clone()) for k, v in params.items()}
    opt = Adafactor(list(tensors.values()), lr=1e-3, relative_step=False, scale_parameter=False, warmup_init=False)
    steps = []
    for _ in range(3):
        grads = {k: torch.randn(v.shape, generator=g) for k, v in tensors.items()}
        for k, v in tensors.items():
            v.grad = grads[k].clone()
        opt.step()
        steps.append({"grads": {k: v.tolist() for k, v in grads.items()}, "params": {k: v.detach().tolist() for k, v in tensors.items()}})
    return {"lr": 1e-3, "initial": {k: v.tolist() for k, v in params.items()}, "steps": steps}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "loss.json").write_text(json.dumps(loss_cases()))
    (OUT / "adafactor.json").write_text(json.dumps(adafactor_case()))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
