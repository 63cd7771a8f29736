#!/usr/bin/env bash
# Builds the WebAssembly half of the npm package into pkg/wasm/ with the size profile
# (`[profile.wasm]` in the workspace Cargo.toml). `npm pack` in pkg/ then makes the tarball.
# --no-opt: wasm-pack would download wasm-opt (offline here), and Debian's binaryen 108 emits
# modules Chromium rejects.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf wasm
wasm-pack build ../crates/st5-wasm --target web --out-dir ../../pkg/wasm --out-name st5_wasm \
  --no-pack --no-gitignore --no-opt --profile wasm
ls -l wasm/st5_wasm_bg.wasm
