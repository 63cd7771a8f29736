#!/usr/bin/env bash
# The test command: builds the `st5` binary and runs every test in the workspace in one release
# build (the CLI tests drive the binary; the parity tests run on flex and on wgpu), then prints
# the total.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin st5
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --release --locked --workspace --exclude st5-wasm -- --test-threads 1 2>&1 | tee "$log"
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
