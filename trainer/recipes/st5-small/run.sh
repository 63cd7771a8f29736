#!/usr/bin/env bash
# The st5-small candidate end to end: st5-mini's data (teacher vectors and NLI triplets, from
# its recipe), the step-0 model on the teacher's vocabulary (st5-mini's student_init.py
# --vocab teacher, with student.json here), then the trainer (resumable: run it again to
# continue from the last checkpoint), then STS-B dev and the size of what a browser downloads.
# Python (tests/reference/requirements.txt) is needed for the data and the step-0 model only.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-python3}
if [ ! -f target/st5-mini-data/teacher.npy ]; then
  "$PY" trainer/recipes/st5-mini/teacher.py --out target/st5-mini-data
elif [ ! -f target/st5-mini-data/extra.npy ]; then
  "$PY" trainer/recipes/st5-mini/teacher.py --out target/st5-mini-data --only extra
fi
if [ ! -f target/st5-mini-data/nli.jsonl ]; then
  "$PY" trainer/recipes/st5-mini/nli.py --out target/st5-mini-data/nli.jsonl
fi
if [ ! -f target/st5-small-init/model.safetensors ]; then
  "$PY" trainer/recipes/st5-mini/student_init.py --vocab teacher \
    --config trainer/recipes/st5-small/student.json --out target/st5-small-init
fi
cargo build --release --locked --bin trainer --bin st5
bin=${CARGO_TARGET_DIR:-target}/release
resume=""
[ -f target/st5-small-run/latest/trainer_state.json ] && resume="--resume"
"$bin/trainer" train --config trainer/recipes/st5-small/st5-small.toml $resume
du -b target/st5-small/model.safetensors target/st5-small/tokenizer.json target/st5-small/2_Dense/model.safetensors
