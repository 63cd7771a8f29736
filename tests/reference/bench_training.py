"""Training benchmark: st5's `trainer` beside sentence-transformers' MultipleNegativesRankingLoss
on the same random model, data, batch and optimiser, in the same run; and the trainer's peak
memory with and without GradCache.

- Model: a random T5 encoder (d_model 256, 4 layers, 4 heads, d_ff 1024, relu, real T5
  vocabulary and tokenizer), mean pooling, Dense 256 -> 256 without bias, Normalize.
- Data: Disfl-QA train question pairs (../shared/data/train/disfl_qa), max_seq_length 32.
- Both: Adafactor (lr 1e-3, no relative step, no parameter scaling), tau 0.01 (scale 100),
  2 threads, pairs/s = median over the timed steps (after 2 warm-up steps).

    python tests/reference/bench_training.py --trainer $CARGO_TARGET_DIR/release/trainer
    python tests/reference/bench_training.py --trainer $CARGO_TARGET_DIR/release/trainer-mpi --mpi --skip-throughput
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


def make_model(path):
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import T5Config, T5EncoderModel, T5TokenizerFast

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=32128, d_model=256, d_kv=64, d_ff=1024, num_layers=4, num_heads=4, feed_forward_proj="relu", dropout_rate=0.0)
    hf = Path(path) / "_hf"
    T5EncoderModel(cfg).save_pretrained(hf, safe_serialization=True)
    tok_dir = DATA / "t5_tokenizer"
    T5TokenizerFast(vocab_file=str(tok_dir / "spiece.model"), tokenizer_file=str(tok_dir / "tokenizer.json")).save_pretrained(hf)
    tr = models.Transformer(str(hf), max_seq_length=32)
    st = SentenceTransformer(modules=[tr, models.Pooling(256, "mean"), models.Dense(256, 256, bias=False, activation_function=torch.nn.Identity()), models.Normalize()])
    st.save(str(path), safe_serialization=True)


def pairs(n):
    qa = json.loads((DATA / "train" / "disfl_qa" / "train.json").read_text())
    out, seen = [], set()
    for _, q in sorted(qa.items()):
        if q["original"] not in seen and q["disfluent"] not in seen:
            seen.update([q["original"], q["disfluent"]])
            out.append({"anchor": q["disfluent"], "positive": q["original"]})
        if len(out) == n:
            break
    return out


def bench_st(model_dir, data, batch, steps):
    import torch
    from sentence_transformers import SentenceTransformer, losses
    from transformers.optimization import Adafactor

    torch.set_num_threads(2)
    model = SentenceTransformer(str(model_dir), device="cpu")
    model.train()
    loss_fn = losses.MultipleNegativesRankingLoss(model, scale=100.0)
    opt = Adafactor(model.parameters(), lr=1e-3, relative_step=False, scale_parameter=False, warmup_init=False)
    times = []
    for step in range(steps + 2):
        chunk = data[(step * batch) % len(data):][:batch]
        t0 = time.perf_counter()
        features = [model.tokenize([d["anchor"] for d in chunk]), model.tokenize([d["positive"] for d in chunk])]
        loss = loss_fn(features, None)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step >= 2:
            times.append(time.perf_counter() - t0)
    return batch / statistics.median(times)


def run_trainer(trainer, model_dir, data_path, work, batch, steps, chunk=0, np=None, threads=2):
    """pairs/s (global pairs over step time) and peak memory; `np`: under `mpirun -np NP`, each
    worker on `threads` threads."""
    tag = f"b{batch}-c{chunk}" + (f"-np{np}" if np else "")
    cfg = work / f"{tag}.toml"
    out = work / f"out-{tag}"
    cfg.write_text(
        f'seed = 1\noutput = "{out}"\ncheckpoint_dir = "{out}-ck"\neval_pairs = 20\neval_data = "{DATA}"\n'
        f'[model]\ninit = "{model_dir}"\n'
        f'[[stage]]\nname = "qa"\nbatch_size = {batch}\nsteps = {steps}\nchunk_size = {chunk}\n'
        f'[[stage.dataset]]\npath = "{data_path}"\ncolumns = ["anchor", "positive"]\n'
    )
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    cmd = [trainer, "train", "--config", str(cfg)]
    if np:
        # --bind-to none: Open MPI would otherwise pin a lone worker to one core.
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(np), "-x", f"RAYON_NUM_THREADS={threads}"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        raise SystemExit(r.stderr)
    rows = (Path(f"{out}-ck") / "metrics.csv").read_text().splitlines()[1:]
    rates = [float(r.split(",")[4]) for r in rows][2:-1]  # after warm-up; the last step also evaluates
    peak = re.search(r"peak memory (\d+) MiB", r.stderr)
    return (statistics.median(rates) if rates else float("nan")), (int(peak.group(1)) if peak else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", default=str(ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "trainer"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--memory", action="store_true", help="also: peak memory at batch 2048 with GradCache (chunk 128) vs plain batches")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--mpi", action="store_true", help="also: `mpirun -np 2` (1 thread each) against `-np 1` (2 threads) at the same global batch; --trainer must be built with the mpi feature")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="st5-train-bench-"))
    model_dir = work / "model"
    make_model(model_dir)
    data = pairs(4096)
    data_path = work / "qa.jsonl"
    data_path.write_text("".join(json.dumps(d) + "\n" for d in data))

    if not args.skip_throughput:
        ours, _ = run_trainer(args.trainer, model_dir, data_path, work, args.batch, args.steps + 3)
        theirs = bench_st(model_dir, data, args.batch, args.steps)
        print(f"training throughput, batch {args.batch}, CPU (2 threads): st5 trainer {ours:.1f} pairs/s, "
              f"sentence-transformers MNRL {theirs:.1f} pairs/s, ratio {ours / theirs:.2f}")
    if args.mpi:
        one, _ = run_trainer(args.trainer, model_dir, data_path, work, args.batch, args.steps + 3, np=1, threads=2)
        two, _ = run_trainer(args.trainer, model_dir, data_path, work, args.batch, args.steps + 3, np=2, threads=1)
        print(f"MPI, global batch {args.batch}: -np 1 (2 threads) {one:.1f} pairs/s, -np 2 (1 thread each) {two:.1f} pairs/s, "
              f"ratio {two / one:.2f} (overhead, not speed-up: the same 2 cores)")
    if args.memory:
        # A GradCache chunk of 128 texts is one plain batch of 64 pairs (128 texts).
        for batch, chunk in [(64, 0), (128, 0), (2048, 128)]:
            rate, peak = run_trainer(args.trainer, model_dir, data_path, work, batch, 3, chunk)
            kind = f"GradCache chunk {chunk}" if chunk else "plain"
            print(f"batch {batch} {kind}: peak memory {peak} MiB, {rate:.1f} pairs/s")


if __name__ == "__main__":
    main()
