#!/usr/bin/env bash
# Builds the WebAssembly half of the npm package into pkg/wasm/ with the size profile
# (`[profile.wasm]` in the workspace Cargo.toml). `npm pack` in pkg/ then makes the tarball.
# Two modules, one JS glue: st5_wasm_bg.wasm (SIMD128) and st5_wasm_relaxed_bg.wasm (the same
# with gemm's kernels on relaxed SIMD's fused multiply-add, the `relaxed-simd` feature), which
# runtime.js loads where the browser validates relaxed SIMD. The second build recompiles only
# gemm and the crates above it.
# Each module is `cargo build` for wasm32, then `wasm-bindgen --target web` for the JS glue and
# TypeScript declarations: what `wasm-pack build --no-pack --no-opt` ran, without a tool that a
# fresh machine compiles from source for minutes. No wasm-opt: Debian's binaryen 108 emits
# modules Chromium rejects, and npm's binaryen 132 (`wasm-opt -Oz`) made a module that gzips
# larger (2.88 MB) than this build with its name section stripped (2.72 MB).
# The tools are checked first and both modules are built in a scratch folder: pkg/wasm/ is
# replaced only by a complete, good build, so a failed run leaves the previous one in place.
set -euo pipefail
cd "$(dirname "$0")"

# The wasm-bindgen CLI must be the wasm-bindgen crate's exact version.
bindgen=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print }' ../Cargo.lock)
missing=()
[ "$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }')" = "$bindgen" ] || missing+=("wasm-bindgen $bindgen")
[ -d "$(rustc --print sysroot 2>/dev/null)/lib/rustlib/wasm32-unknown-unknown" ] ||
  missing+=("the wasm32-unknown-unknown target")
command -v node >/dev/null || missing+=("node")
if [ ${#missing[@]} -gt 0 ]; then
  printf -v list '%s, ' "${missing[@]}"
  echo "pkg/build.sh: missing ${list%, }; run: bash scripts/setup-pkg.sh" >&2
  exit 1
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/st5-pkg.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
target=$(cargo metadata --format-version 1 --no-deps --locked |
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).target_directory))')
build() {
  cargo build --locked --lib -p st5-wasm --target wasm32-unknown-unknown --profile wasm "${@:2}"
  wasm-bindgen "$target/wasm32-unknown-unknown/wasm/st5_wasm.wasm" --target web --typescript \
    --out-dir "$scratch/$1" --out-name st5_wasm
  node tools/strip-names.mjs "$scratch/$1/st5_wasm_bg.wasm"
}
build wasm
build wasm-relaxed --features relaxed-simd
# The glue is generated from the exports, which the feature does not change: one copy serves both.
if ! cmp -s "$scratch/wasm/st5_wasm.js" "$scratch/wasm-relaxed/st5_wasm.js"; then
  echo "pkg/build.sh: the two builds' JS glue differs; runtime.js assumes one glue" >&2
  exit 1
fi
mv "$scratch/wasm-relaxed/st5_wasm_bg.wasm" "$scratch/wasm/st5_wasm_relaxed_bg.wasm"
rm -rf wasm
mv "$scratch/wasm" wasm
for f in wasm/st5_wasm_bg.wasm wasm/st5_wasm_relaxed_bg.wasm; do
  echo "$f: $(stat -c %s "$f") bytes raw, $(gzip -9 -c "$f" | wc -c) gzipped"
done
