#!/usr/bin/env bash
# Sets up what the main job (README quick start, step 1: build `st5` and search with the built-in
# model) needs on a fresh machine: a Rust toolchain (rust-toolchain.toml pins it; rustup installs
# it on first use) and the built-in model's weights, committed in parts. The test command's own
# tools (lavapipe, Chromium, wasm-bindgen-cli, ...) are installed by scripts/setup-test.sh, which
# scripts/test.sh runs.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust with rustup (https://rustup.rs)" >&2
  exit 1
fi

# The shipped model's weights are committed in parts under 20 MiB.
bash "$(dirname "$0")/model-parts.sh" join
