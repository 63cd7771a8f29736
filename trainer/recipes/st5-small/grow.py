"""The st5-small candidate at step 0: st5-mini grown from 2 to 4 layers.

Copies every tensor of the trained st5-mini (models/st5-mini: token embeddings, blocks 0-1, the
final norm, the Dense) and appends blocks whose attention output `o` and FFN output `wo` are zero,
so the grown model starts as exactly st5-mini (the new blocks add nothing to the residual stream)
and training only has to learn what the extra depth is for. The new blocks' other weights use
transformers' T5 initialisation (seeded).

Writes a sentence-transformers directory that the trainer's `model.init` loads unchanged.

    python trainer/recipes/st5-small/grow.py --out target/st5-small-init
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
MINI = ROOT / "models" / "st5-mini"
# st5-mini's recipe: the identity blocks and the directory writing are the same.
sys.path.insert(0, str(ROOT / "trainer" / "recipes" / "st5-mini"))
from student_init import identity_blocks, save_fresh  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "target" / "st5-small-init"))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(args.seed)

    from safetensors.torch import load_file, save_file
    from transformers import T5Config, T5EncoderModel

    cfg = json.loads((MINI / "config.json").read_text())
    grown_from = cfg["num_layers"]
    cfg["num_layers"] = args.layers
    model = T5EncoderModel(T5Config(**cfg)).eval()
    mini = {k: v.float() for k, v in load_file(str(MINI / "model.safetensors")).items()}
    state = model.state_dict()
    with torch.no_grad():
        for name, value in mini.items():
            # `shared.weight` is tied to the encoder's `embed_tokens`: copying it sets both.
            state[name].copy_(value)
    identity_blocks(model.encoder.block[grown_from:])

    out = Path(args.out)
    save_fresh(model, out)
    for f in ["tokenizer.json", "tokenizer_config.json", "modules.json", "sentence_bert_config.json"]:
        shutil.copy(MINI / f, out / f)
    for sub in ["1_Pooling", "2_Dense", "3_Normalize"]:
        shutil.copytree(MINI / sub, out / sub)
    dense = load_file(str(MINI / "2_Dense" / "model.safetensors"))
    save_file({k: v.float() for k, v in dense.items()}, str(out / "2_Dense" / "model.safetensors"))
    print("wrote", out, f"({grown_from} → {args.layers} layers)")


if __name__ == "__main__":
    main()
