#!/usr/bin/env bash
# The fuzz smoke run of the test command (scripts/test.sh): builds every target with the pinned
# nightly (scripts/setup-test.sh installs it and cargo-fuzz), then fuzzes each from its committed
# corpus (fuzz/corpus/<target>, read only: new inputs go to a scratch folder) for a fixed number
# of executions with a fixed seed, about 5 s each here, so that a CI run is repeatable: new bugs
# are for campaigns to find, not for CI to stumble on. A crash fails the run and leaves its
# input under fuzz/artifacts/<target>/.
# Longer campaigns: cargo +nightly-2026-05-19 fuzz run --fuzz-dir fuzz -s none TARGET -- -runs=N
set -euo pipefail
cd "$(dirname "$0")/.."
NIGHTLY=nightly-2026-05-19
# Executions per target: ~5 s each on this project's 2-core machine.
declare -A RUNS=([config_json]=1500000 [model_files]=300000 [safetensors]=1200000
  [tokenizer_json]=15000 [charsmap]=1200 [npy]=1500000 [trainer_config]=100000
  [dataset_rows]=800000 [trainer_state]=800000 [index_file]=200000 [prompt_file]=500000
  [beir]=300000 [search_filter]=600000)
# Its own folder inside the cargo target folder: nightly artifacts never mix with the stable
# build's, and a test run leaves nothing outside target/ (which git ignores).
export CARGO_TARGET_DIR="${ST5_FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/fuzz}"
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^st5-fuzz$')
# cargo-fuzz has no --locked: check here that fuzz/Cargo.lock is current, so that a change of
# dependencies fails here instead of resolving new versions on every fresh clone.
cargo "+$NIGHTLY" metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null
cargo "+$NIGHTLY" fuzz build --fuzz-dir fuzz -s none
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
passed=0
failed=0
for t in $targets; do
  mkdir -p "$scratch/$t"
  if cargo "+$NIGHTLY" fuzz run --fuzz-dir fuzz -s none "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
    -runs="${RUNS[$t]:-100000}" -seed=1 -rss_limit_mb=2048 -print_final_stats=1 >"$scratch/$t.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$t.log")
    echo "fuzz $t ... ok ($runs executions)"
    passed=$((passed + 1))
  else
    echo "fuzz $t ... FAILED"
    grep -E "panicked|SUMMARY|Test unit written" "$scratch/$t.log" || tail -20 "$scratch/$t.log"
    failed=$((failed + 1))
  fi
done
echo "test result: $([ $failed = 0 ] && echo ok || echo FAILED). $passed passed; $failed failed; 0 ignored; 0 measured; 0 filtered out"
[ "$failed" = 0 ]
