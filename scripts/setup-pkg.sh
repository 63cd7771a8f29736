#!/usr/bin/env bash
# Installs what building the npm package (pkg/build.sh) needs, each step skipped when already
# done: Node.js with npm (Debian's packages when there is none; any Node ≥ 20 will do), the
# wasm32 target, and wasm-bindgen-cli at exactly the wasm-bindgen crate's version (the JS glue's
# generator, and wasm-bindgen-test-runner for scripts/wasm-test.sh). The demo (www/serve.sh) and
# the test command's setup (scripts/setup-test.sh) both run it; with ST5_SKIP_BROWSER=1 it installs Node alone (the test
# command's JS format check needs it).
set -euo pipefail
cd "$(dirname "$0")/.."

# A Node.js already on PATH (nvm, nodesource, ...) is kept.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || bash scripts/apt.sh nodejs npm
[ "${ST5_SKIP_BROWSER:-0}" = 1 ] && exit 0

rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
bindgen=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print }' Cargo.lock)
bash scripts/cargo-install.sh wasm-bindgen-cli "$bindgen"
