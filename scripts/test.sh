#!/usr/bin/env bash
# The test command: builds the `st5` binary and runs every test in the workspace in one release
# build (the CLI tests drive the binary; the parity tests run on flex and on wgpu).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin st5
cargo test --release --locked --workspace -- --test-threads 1
