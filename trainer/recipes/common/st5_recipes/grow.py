"""A trained model grown deeper at step 0: the st5-small candidate was st5-mini grown from 2 to 4
layers; st5-small-v2's warm start (`trainer/recipes/st5-small-v2/warm_start.py`) grows st5-small from 4 to 6.

Copies every tensor of the trained model (`--from`, default models/st5-mini: token embeddings,
its blocks, the final norm, the Dense) and appends blocks whose attention output `o` and FFN
output `wo` are zero, so the grown model starts as exactly the trained one (the new blocks add
nothing to the residual stream) and training only has to learn what the extra depth is for. The
new blocks' other weights use transformers' T5 initialisation (seeded).

Writes a sentence-transformers directory that the trainer's `model.init` loads unchanged.
`--from` must hold f16 or f32 weights: an int8 model (st5-small) is first written in f32 by
`st5 quantize --dtype f32`.

    python -m st5_recipes.grow --out target/st5-small-init
"""

import argparse
import json
import shutil
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
MINI = ROOT / "models" / "st5-mini"
# st5-mini's recipe: the identity blocks and the directory writing are the same.
from st5_recipes.student_init import identity_blocks, save_fresh


def grow(src, layers, out, seed=1):
    """Writes `src` (a sentence-transformers directory, f16 or f32) grown to `layers` blocks into
    `out`; returns the number of blocks it had."""
    from safetensors.torch import load_file, save_file
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(seed)
    cfg = json.loads((src / "config.json").read_text())
    grown_from = cfg["num_layers"]
    cfg["num_layers"] = layers
    model = T5EncoderModel(T5Config(**cfg)).eval()
    mini = load_file(str(src / "model.safetensors"))
    if any(not v.is_floating_point() for v in mini.values()):
        raise SystemExit(f"{src}: int8 weights; write it in f32 first (st5 quantize --dtype f32)")
    mini = {k: v.float() for k, v in mini.items()}
    state = model.state_dict()
    with torch.no_grad():
        for name, value in mini.items():
            # `shared.weight` is tied to the encoder's `embed_tokens`: copying it sets both.
            state[name].copy_(value)
    identity_blocks(model.encoder.block[grown_from:])

    save_fresh(model, out)
    for f in ["tokenizer.json", "tokenizer_config.json", "modules.json", "sentence_bert_config.json"]:
        shutil.copy(src / f, out / f)
    for sub in ["1_Pooling", "2_Dense", "3_Normalize"]:
        shutil.copytree(src / sub, out / sub)
    dense = load_file(str(src / "2_Dense" / "model.safetensors"))
    save_file({k: v.float() for k, v in dense.items()}, str(out / "2_Dense" / "model.safetensors"))
    return grown_from


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", default=str(MINI), help="the trained model to grow")
    ap.add_argument("--out", default=str(ROOT / "target" / "st5-small-init"))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    grown_from = grow(Path(args.src), args.layers, Path(args.out), args.seed)
    print("wrote", args.out, f"({grown_from} → {args.layers} layers)")


if __name__ == "__main__":
    main()
