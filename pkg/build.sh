#!/usr/bin/env bash
# Builds the WebAssembly half of the npm package into pkg/wasm/ with the size profile
# (`[profile.wasm]` in the workspace Cargo.toml). `npm pack` in pkg/ then makes the tarball.
# Two modules, one JS glue: st5_wasm_bg.wasm (SIMD128) and st5_wasm_relaxed_bg.wasm (the same
# with gemm's kernels on relaxed SIMD's fused multiply-add, the `relaxed-simd` feature), which
# runtime.js loads where the browser validates relaxed SIMD. The second build recompiles only
# gemm and the crates above it.
# --no-opt: wasm-pack would download wasm-opt (offline here), Debian's binaryen 108 emits
# modules Chromium rejects, and npm's binaryen 132 (`wasm-opt -Oz`) made a module that gzips
# larger (2.88 MB) than this build with its name section stripped (2.72 MB).
set -euo pipefail
cd "$(dirname "$0")"
rm -rf wasm wasm-relaxed
build() {
  wasm-pack build ../crates/st5-wasm --target web --out-dir "../../pkg/$1" --out-name st5_wasm \
    --no-pack --no-gitignore --no-opt --profile wasm "${@:2}"
  node tools/strip-names.mjs "$1/st5_wasm_bg.wasm"
}
build wasm
build wasm-relaxed -- --features relaxed-simd
# The glue is generated from the exports, which the feature does not change: one copy serves both.
if ! cmp -s wasm/st5_wasm.js wasm-relaxed/st5_wasm.js; then
  echo "pkg/build.sh: the two builds' JS glue differs; runtime.js assumes one glue" >&2
  exit 1
fi
mv wasm-relaxed/st5_wasm_bg.wasm wasm/st5_wasm_relaxed_bg.wasm
rm -rf wasm-relaxed
for f in wasm/st5_wasm_bg.wasm wasm/st5_wasm_relaxed_bg.wasm; do
  echo "$f: $(stat -c %s "$f") bytes raw, $(gzip -9 -c "$f" | wc -c) gzipped"
done
