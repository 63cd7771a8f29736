#!/usr/bin/env bash
# The Banking77 prompt end to end: pairs (Python, standard library), the prompt run (resumable:
# run it again to continue), then the held-out scores with and without the prompt.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-python3}
DATA=${ST5_DATA:-../shared/data}
bash scripts/model-parts.sh join
# (Pairs written before they carried the intent, the trainer's `group`, are written again.)
grep -qs '"intent"' target/prompt-banking77/pairs.jsonl ||
  "$PY" trainer/recipes/prompt-banking77/pairs.py --data "$DATA" --out target/prompt-banking77/pairs.jsonl
cargo build --release --locked --bin trainer --bin st5
bin=${CARGO_TARGET_DIR:-target}/release
resume=""
[ -f target/prompt-banking77/run/latest/trainer_state.json ] && resume="--resume"
"$bin/trainer" train --config trainer/recipes/prompt-banking77/prompt-banking77.toml $resume
tasks=${TASKS:-banking77-dev,stsb-dev}
"$bin/st5" eval --model models/st5-mini --data "$DATA" --tasks "$tasks"
"$bin/st5" eval --model models/st5-mini --data "$DATA" --tasks "$tasks" --prompt target/prompt-banking77/banking77.safetensors
