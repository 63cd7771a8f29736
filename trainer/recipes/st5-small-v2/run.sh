#!/usr/bin/env bash
# st5-small-v2 end to end, in stages that each fit one session on 2 cores, resumable on a new
# machine: run it again and it continues from the newest stage it finds.
# - data ($ST5_DATA, default /var/tmp/st5-small-v2-data, linked as target/st5-small-v2-data):
#   the sentences and the teachers' vectors in shards (vectors.py: resumable), the distillation
#   targets, the NLI triplets, the step-0 student and each stage's model ($ST5_DATA/stages/);
#   rebuilt when missing. The targets' packed shards ($ST5_DATA/packed/mpnet-pca384, or
#   $ST5_PACKED: int8, 104 MB, outside git) spare a new machine the teacher's ~70 minutes when
#   copied there: vectors.py embeds only the shards not packed yet;
# - 1-distill, 2-distill (one pass over the sentences, cut in two interleaved halves),
#   3-distill-more, 5-distill, 6-nli: each stage starts from the one before; a stage interrupted
#   mid-way resumes from its checkpoint when the data directory survived, else it starts over.
#   4-nli (NLI straight after stage 3) is a side branch the log compares against; the chain does
#   not need it. The stage models stay outside git (the repository holds the product, and this
#   recipe's model was not shipped); to keep them across machines, copy $ST5_DATA/stages.
# - BRANCH=warm: the second branch instead, stages/7-warm-distill and stages/8-nli, from
#   warm_start.py's step 0 (st5-small grown to 6 layers, its Dense aligned to the targets).
# - BRANCH=both: the third, stages/9-both-distill and stages/10-nli: the same step 0 aligned to
#   targets from both teachers (both-pca384; the old teacher's vectors take ~10 minutes).
# Python: tests/reference/requirements.txt, then
#   pip install --no-deps -r trainer/recipes/st5-small-v2/requirements.txt
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --no-deps -e trainer/recipes/common   # the recipes' shared helpers (st5_recipes)
here=trainer/recipes/st5-small-v2
data=${ST5_DATA:-/var/tmp/st5-small-v2-data}
mkdir -p "$data" target
ln -sfn "$data" target/st5-small-v2-data
export ST5_DATA="$data"

stage_done() { [ -e "$data/stages/$1/model.safetensors" ]; }

teachers=mpnet targets=mpnet-pca384 warm=warm
case "${BRANCH:-chain}" in
  warm) stages="7-warm-distill 8-nli" ;;
  both) stages="9-both-distill 10-nli" teachers=mpnet,minilm targets=both-pca384 warm=warm-both ;;
  *) stages="1-distill 2-distill 3-distill-more 5-distill 6-nli" ;;
esac
first=${stages%% *} final=${stages##* } distilled=${stages% *}
# The targets are needed until the branch's last distillation stage (the one before NLI) is done.
if ! stage_done "${distilled##* }"; then
  "$PY" "$here/vectors.py" --teachers $teachers --bf16 --pack --targets $targets --split 2
  if [ "$first" = 1-distill ] && ! stage_done 1-distill && [ ! -f "$data/init/model.safetensors" ]; then
    "$PY" -m st5_recipes.student_init --vocab teacher --config "$here/student.json" --out "$data/init"
  fi
fi
if ! stage_done "$final" && [ ! -f "$data/nli.jsonl" ]; then
  "$PY" -m st5_recipes.nli --out "$data/nli.jsonl"
fi
cargo build --release --locked --bin trainer --bin st5
bin=${CARGO_TARGET_DIR:-target}/release
if [ "$first" != 1-distill ] && ! stage_done "$first"; then
  bash scripts/model-parts.sh join models/st5-small/
  ST5="$bin/st5" "$PY" "$here/warm_start.py" --out "$data/$warm" --targets "targets-$targets.npy"
fi
for stage in $stages; do
  stage_done "$stage" && continue
  resume=""
  [ -f "$data/checkpoints/$stage/latest/trainer_state.json" ] && resume="--resume"
  "$bin/trainer" train --config "$here/$stage.toml" $resume
done
# What a browser downloads (every file but the card), then STS-B dev by genre and SICK-R train + trial.
final="$data/stages/$final"
find "$final" -type f ! -name README.md ! -name '*.part*' -printf '%s\n' | awk '{ s += $1 } END { printf "download: %d bytes\n", s }'
ST5="$bin/st5" "$PY" -m st5_recipes.genre "$final" --sick
