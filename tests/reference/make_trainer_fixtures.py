"""Reference values for the trainer's loss and optimiser, from PyTorch (pinned in requirements.txt).

Writes tests/fixtures/trainer/:
- loss.json: for fixed embeddings, the Sentence-T5 contrastive loss (in-batch softmax
  cross-entropy over cosine similarity / tau, tau = 0.01) with and without hard negatives,
  symmetric or not, and its gradient with respect to every embedding. The one-directional loss
  is sentence-transformers' MultipleNegativesRankingLoss with scale 1/tau; the symmetric one
  averages it with the positive-to-anchor direction (MultipleNegativesSymmetricRankingLoss).
- adafactor.json: three steps of transformers.optimization.Adafactor as the paper configures
  it (constant lr 1e-3, no relative step, no parameter scaling) on a matrix and a vector.
- step/: one full training step on a tiny random T5 (gated-gelu, vocab 100): init/ is a
  sentence-transformers directory (T5EncoderModel, mean pooling, Dense 16 -> 12 without bias,
  Normalize), batch.json the token ids of 4 (anchor, positive, hard negative) triplets, and
  after/ the weights after one Adafactor step on the loss above (tau 0.01, which is
  MultipleNegativesRankingLoss with scale 100).

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


def train_step_case():
    from safetensors.torch import save_file
    from transformers import T5Config, T5EncoderModel

    out = OUT / "step"
    torch.manual_seed(3)
    cfg = T5Config(vocab_size=100, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2, feed_forward_proj="gated-gelu",
                   dropout_rate=0.0, relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0)
    enc = T5EncoderModel(cfg)
    dense = torch.nn.Linear(16, 12, bias=False)

    def write(dirname):
        d = out / dirname
        enc.save_pretrained(d, safe_serialization=True)
        (d / "2_Dense").mkdir(parents=True, exist_ok=True)
        save_file({"linear.weight": dense.weight.detach().contiguous()}, str(d / "2_Dense" / "model.safetensors"))
        (d / "2_Dense" / "config.json").write_text(json.dumps({"in_features": 16, "out_features": 12, "bias": False, "activation_function": "torch.nn.modules.linear.Identity"}))
        (d / "1_Pooling").mkdir(exist_ok=True)
        (d / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 16, "pooling_mode_mean_tokens": True}))
        (d / "3_Normalize").mkdir(exist_ok=True)
        (d / "3_Normalize" / "config.json").write_text("{}")
        (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
        modules = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Dense", "Dense"), ("3_Normalize", "Normalize")]
        (d / "modules.json").write_text(json.dumps([{"idx": i, "name": str(i), "path": p, "type": f"sentence_transformers.models.{t}"} for i, (p, t) in enumerate(modules)]))

    write("init")
    g = torch.Generator().manual_seed(4)
    lengths = {"anchors": [5, 3, 7, 4], "positives": [6, 2, 4, 8], "negatives": [3, 5, 2, 6]}
    ids = {k: [torch.randint(3, 100, (n - 1,), generator=g).tolist() + [1] for n in ls] for k, ls in lengths.items()}

    def embed(seqs):
        n = max(map(len, seqs))
        input_ids = torch.tensor([s + [0] * (n - len(s)) for s in seqs])
        mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in seqs])
        h = enc(input_ids=input_ids, attention_mask=mask).last_hidden_state
        pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return F.normalize(dense(pooled), dim=-1)

    params = list(enc.parameters()) + list(dense.parameters())
    opt = Adafactor(params, lr=1e-3, relative_step=False, scale_parameter=False, warmup_init=False)
    loss = contrastive(embed(ids["anchors"]), embed(ids["positives"]), embed(ids["negatives"]), symmetric=False)
    loss.backward()
    opt.step()
    write("after")
    (out / "batch.json").write_text(json.dumps({**ids, "loss": loss.item()}))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "loss.json").write_text(json.dumps(loss_cases()))
    (OUT / "adafactor.json").write_text(json.dumps(adafactor_case()))
    train_step_case()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
