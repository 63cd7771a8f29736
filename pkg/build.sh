#!/usr/bin/env bash
# Builds the WebAssembly half of the npm package into pkg/wasm/ with the size profile
# (`[profile.wasm]` in the workspace Cargo.toml). `npm pack` in pkg/ then makes the tarball.
# --no-opt: wasm-pack would download wasm-opt (offline here), Debian's binaryen 108 emits
# modules Chromium rejects, and npm's binaryen 132 (`wasm-opt -Oz`) made a module that gzips
# larger (2.88 MB) than this build with its name section stripped (2.72 MB).
set -euo pipefail
cd "$(dirname "$0")"
rm -rf wasm
wasm-pack build ../crates/st5-wasm --target web --out-dir ../../pkg/wasm --out-name st5_wasm \
  --no-pack --no-gitignore --no-opt --profile wasm
node tools/strip-names.mjs wasm/st5_wasm_bg.wasm
echo "wasm: $(stat -c %s wasm/st5_wasm_bg.wasm) bytes raw, $(gzip -9 -c wasm/st5_wasm_bg.wasm | wc -c) gzipped"
