"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/seed-*) from the repo's fixtures
and the trainer's configs and data,
kept small so that each execution is fast: real configs and layouts, safetensors files of every
dtype st5 reads (f32, f16, bf16, int8 rows with their scales) and a sharded checkpoint, the real
tokenizer.json cut to a few hundred pieces (with and without its charsmap), the real charsmap,
and .npy arrays. Run once by hand (numpy only); the corpora are committed, and fuzzing adds to
them (minimised with `cargo fuzz cmin`).

    python3 fuzz/seed.py
"""

import ast
import base64
import json
import re
import struct
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "fuzz" / "corpus"
# The model_files target's separator and file list, read from the one place they are defined.
_FUZZING_RS = (ROOT / "crates" / "st5-format" / "src" / "fuzzing.rs").read_text()
SEP = ast.literal_eval(re.search(r"MODEL_FILES_SEP: &\[u8\] = b(\".*?\");", _FUZZING_RS).group(1)).encode()
FILES = re.findall(r'"([^"]+)"', re.search(r"MODEL_FILES: \[&str; \d+\] = \[(.*?)\];", _FUZZING_RS, re.S).group(1))


def put(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data)


def safetensors(tensors, metadata=None):
    """A safetensors file from {name: (dtype, shape, raw bytes)}."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def main():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    q = np.clip(np.round(w / (np.abs(w).max(1, keepdims=True) / 127)), -127, 127).astype(np.int8)
    scale = (np.abs(w).max(1, keepdims=True) / 127).astype(np.float32)
    bf16 = (w.view(np.uint32) >> 16).astype(np.uint16)
    files = {
        "f32": safetensors({"shared.weight": ("F32", [4, 3], w.tobytes())}),
        "f16": safetensors({"encoder.final_layer_norm.weight": ("F16", [3], w[0].astype(np.float16).tobytes())}),
        "bf16": safetensors({"shared.weight": ("BF16", [4, 3], bf16.tobytes())}),
        "int8": safetensors(
            {"shared.weight": ("I8", [4, 3], q.tobytes()), "shared.weight_scale": ("F32", [4, 1], scale.tobytes())},
            {"format": "pt"},
        ),
        "dense": (FIX / "st-enc-mean-relu" / "2_Dense" / "model.safetensors").read_bytes(),
    }
    for name, data in files.items():
        put("safetensors", name, data)

    for model in ["st-enc-mean-relu", "st-enc-first-gated-f16", "hf-t5-gated-bf16-sharded", "hf-t5-relu-f16"]:
        put("config_json", model, (FIX / model / "config.json").read_bytes())

    # Model directories, with tiny shards standing in for the real weights.
    st = FIX / "st-enc-mean-relu"
    index = {"metadata": {}, "weight_map": {"shared.weight": FILES[7], "encoder.final_layer_norm.weight": FILES[8]}}
    parts = {
        "modules.json": (st / "modules.json").read_bytes(),
        "config.json": (st / "config.json").read_bytes(),
        "sentence_bert_config.json": (st / "sentence_bert_config.json").read_bytes(),
        "tokenizer_config.json": b'{"model_max_length": 512}',
        "1_Pooling/config.json": (st / "1_Pooling" / "config.json").read_bytes(),
        "2_Dense/config.json": (st / "2_Dense" / "config.json").read_bytes(),
        "model.safetensors.index.json": json.dumps(index).encode(),
        FILES[7]: files["int8"],
        FILES[8]: files["f16"],
    }
    put("model_files", "st-sharded", SEP.join(parts[f] for f in FILES))
    plain = dict.fromkeys(FILES, b"")
    plain["config.json"] = (FIX / "hf-t5-relu-f16" / "config.json").read_bytes()
    plain["model.safetensors.index.json"] = (FIX / "hf-t5-gated-bf16-sharded" / "model.safetensors.index.json").read_bytes()
    plain[FILES[7]] = files["bf16"]
    put("model_files", "hf-plain", SEP.join(plain[f] for f in FILES))

    tok = json.loads((st / "tokenizer.json").read_text())
    tok["model"]["vocab"] = tok["model"]["vocab"][:300]
    tok["added_tokens"] = tok["added_tokens"][:3]
    put("tokenizer_json", "t5-300-pieces", json.dumps(tok).encode())
    norm = tok["normalizer"]
    steps = norm["normalizers"] if norm["type"] == "Sequence" else [norm]
    blob = base64.b64decode(next(s for s in steps if s["type"] == "Precompiled")["precompiled_charsmap"])
    tok["normalizer"] = None
    put("tokenizer_json", "t5-300-pieces-no-charsmap", json.dumps(tok).encode())
    put("charsmap", "t5", blob)

    # The trainer's files: its configs, dataset rows (first byte: format and columns, see
    # st5_trainer::fuzzing::dataset_rows) and a checkpoint state that fits the target's datasets.
    for path in [ROOT / "trainer/configs/tiny.toml", *sorted((ROOT / "trainer/recipes").glob("*/*.toml"))]:
        put("trainer_config", path.stem, path.read_bytes())
    data = ROOT / "trainer/configs/data"
    put("dataset_rows", "qa-jsonl", b"\x00" + b"".join((data / "qa.jsonl").read_bytes().splitlines(True)[:6]))
    put("dataset_rows", "nli-tsv", b"\x03" + b"".join((data / "nli.tsv").read_bytes().splitlines(True)[:6]))
    state = {
        "stage": 1,
        "step": 3,
        "sampler": {"rng": 5, "orders": [[2, 0, 1], [4, 3, 1, 0, 2]], "positions": [1, 2], "epochs": [0, 1]},
        "bad_steps": 0,
        "param_ids": {"t5.shared": 1, "dense.0.weight": 2},
    }
    put("trainer_state", "fits", json.dumps(state).encode())

    put("npy", "2x3", npy(np.arange(6, dtype=np.float32).reshape(2, 3)))
    put("npy", "0x4", npy(np.zeros((0, 4), dtype=np.float32)))


def npy(a):
    import io

    f = io.BytesIO()
    np.save(f, a)
    return f.getvalue()


if __name__ == "__main__":
    main()
