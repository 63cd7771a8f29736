"""Soft-prompt reference (Lester et al. 2021): embeddings of the fixture model
`st-enc-mean-relu` with P random prompt vectors before each text's token embeddings, computed
with transformers' T5EncoderModel (`inputs_embeds`), the prompt attended to but not pooled.
Writes tests/fixtures/prompt/expected.json: the prompt, the texts and their ids, and the
embeddings for enc-mean (mean over the text's tokens) and enc-first (the text's first token,
position P), each then the fixture's Dense and L2 normalisation; and a contrastive loss on them
with its gradient with respect to the prompt alone (the model frozen), which prompt training
follows. Also the prompt as a prompt file for the enc-mean model, tests/fixtures/prompt/
enc-mean.safetensors, its base named by the weights fingerprint computed here independently of
st5 (SHA-256 over `name:sha256(file)` lines of the weight files, in name order).

    /tmp/st5-ref/bin/python tests/reference/make_prompt_fixture.py
"""

import hashlib
import json
from pathlib import Path

import torch
from safetensors.numpy import save_file
from safetensors.torch import load_file
from transformers import T5EncoderModel

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
P = 3


def main():
    model_dir = FIX / "st-enc-mean-relu"
    exp = json.loads((model_dir / "expected.json").read_text())
    ids = exp["input_ids"]
    enc = T5EncoderModel.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    dense = load_file(model_dir / "2_Dense" / "model.safetensors")["linear.weight"].float()
    d = enc.config.d_model
    torch.manual_seed(0)
    prompt = torch.randn(P, d) * 0.5
    n, seq = len(ids), max(len(t) for t in ids)
    ids_t = torch.zeros(n, seq, dtype=torch.long)
    mask = torch.zeros(n, seq)
    for i, t in enumerate(ids):
        ids_t[i, : len(t)] = torch.tensor(t)
        mask[i, : len(t)] = 1
    with torch.no_grad():
        x = torch.cat([prompt.expand(n, P, d), enc.get_input_embeddings()(ids_t)], 1)
        attention = torch.cat([torch.ones(n, P), mask], 1)
        h = enc(inputs_embeds=x, attention_mask=attention).last_hidden_state
        text = h[:, P:]
        pooled = {
            "enc-mean": (text * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp_min(1e-9),
            "enc-first": text[:, 0],
        }
        out = {
            k: torch.nn.functional.normalize(v @ dense.T, dim=-1).tolist() for k, v in pooled.items()
        }
    # The training signal: the contrastive loss (τ 0.05, in-batch softmax, no negatives) of
    # anchors = texts 0-3 against positives = texts 4-7 on the prompted enc-mean embeddings, and
    # its gradient with respect to the prompt alone (the model frozen).
    prompt_p = prompt.clone().requires_grad_(True)
    for param in enc.parameters():
        param.requires_grad_(False)
    x = torch.cat([prompt_p.expand(n, P, d), enc.get_input_embeddings()(ids_t)], 1)
    h = enc(inputs_embeds=x, attention_mask=torch.cat([torch.ones(n, P), mask], 1)).last_hidden_state[:, P:]
    e = torch.nn.functional.normalize(((h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)) @ dense.T, dim=-1)
    a, pos = torch.nn.functional.normalize(e[:4], dim=-1), torch.nn.functional.normalize(e[4:8], dim=-1)
    loss = torch.nn.functional.cross_entropy(a @ pos.T / 0.05, torch.arange(4))
    loss.backward()
    training = {"temperature": 0.05, "anchors": [0, 1, 2, 3], "positives": [4, 5, 6, 7], "loss": loss.item(), "prompt_grad": prompt_p.grad.tolist()}
    path = FIX / "prompt" / "expected.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        json.dumps({"model": "st-enc-mean-relu", "prompt": prompt.tolist(), "texts": exp["sentences"], "input_ids": ids, "embeddings": out, "training": training})
    )
    print(f"wrote {path}")
    weights = ["model.safetensors", "2_Dense/model.safetensors"]
    sha = lambda b: hashlib.sha256(b).hexdigest()
    lines = sorted(f"{name}:{sha((model_dir / name).read_bytes())}" for name in weights)
    meta = {"base_fingerprint": sha("\n".join(lines).encode()), "length": P, "d_model": d, "variant": "enc-mean"}
    prompt_file = FIX / "prompt" / "enc-mean.safetensors"
    save_file({"prompt": prompt.numpy()}, prompt_file, metadata={"st5_prompt": json.dumps(meta)})
    print(f"wrote {prompt_file}")


if __name__ == "__main__":
    main()
