#!/usr/bin/env bash
# st5-small (the built-in default) end to end: st5-mini's data (teacher vectors and NLI triplets, from
# its recipe), the step-0 model on the teacher's vocabulary (st5-mini's student_init.py
# --vocab teacher, with student.json here), then the trainer (resumable: run it again to
# continue from the last checkpoint), then the parts, the download size, STS-B dev by genre and
# the STS table.
# Python (tests/reference/requirements.txt) is needed for the data, the step-0 model and genre.py.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --no-deps -e trainer/recipes/common   # the recipes' shared helpers (st5_recipes)
if [ ! -f target/st5-mini-data/teacher.npy ]; then
  "$PY" -m st5_recipes.teacher --out target/st5-mini-data
elif [ ! -f target/st5-mini-data/extra.npy ]; then
  "$PY" -m st5_recipes.teacher --out target/st5-mini-data --only extra
fi
if [ ! -f target/st5-mini-data/nli.jsonl ]; then
  "$PY" -m st5_recipes.nli --out target/st5-mini-data/nli.jsonl
fi
if [ ! -f target/st5-small-init/model.safetensors ]; then
  "$PY" -m st5_recipes.student_init --vocab teacher \
    --config trainer/recipes/st5-small/student.json --out target/st5-small-init
fi
cargo build --release --locked --bin trainer --bin st5
bin=${CARGO_TARGET_DIR:-target}/release
resume=""
[ -f target/st5-small-run/latest/trainer_state.json ] && resume="--resume"
"$bin/trainer" train --config trainer/recipes/st5-small/st5-small.toml $resume
bash scripts/model-parts.sh split   # the weights are committed in parts under 20 MiB
# What a browser downloads (every file but the card), then STS-B dev by genre and the STS table.
find models/st5-small -type f ! -name README.md ! -name '*.part*' -printf '%s\n' | awk '{ s += $1 } END { printf "download: %d bytes\n", s }'
ST5="$bin/st5" "$PY" -m st5_recipes.genre models/st5-small
"$bin/st5" eval --model models/st5-small --tasks sts
