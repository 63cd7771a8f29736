#!/usr/bin/env bash
# `wasm-pack test` in headless Chromium: tests/browser/web.rs, the st5-wasm exports called from
# Rust (the file planner, parity on the CPU and WebGPU, errors), run by wasm-bindgen-test-runner
# through ChromeDriver with crates/st5-wasm/webdriver.json's flags (WebGPU on SwiftShader).
# It cannot share the npm package's build (pkg/build.sh, `--profile wasm`): that profile aborts
# on panic, and cargo builds a test and all its dependencies with unwinding, so they would be
# compiled again in any case. The release profile compiles and links fastest of those that run
# burn's kernels at a usable speed.
# Then st5-int8's kernel tables on wasm32 in Node (below).
#   bash scripts/wasm-test.sh     (scripts/setup-test.sh installs wasm-pack, wasm-bindgen-cli,
#                                  which brings wasm-bindgen-test-runner, and chromium-driver)
set -euo pipefail
cd "$(dirname "$0")/../crates/st5-wasm"
# The runner's default 20 s budget covers the whole run; SwiftShader needs more.
export WASM_BINDGEN_TEST_TIMEOUT=600
wasm-pack test --headless --chrome --chromedriver "$(command -v chromedriver)" --release

# st5-int8's kernel tables (every kernel equal to the scalar one bit for bit) on wasm32, in Node:
# the SIMD128 kernel, then with the `relaxed-simd` feature the relaxed one too (V8 validates
# relaxed SIMD behind a flag in Node 20; the optimizing tier, as the kernel's documentation says
# why not Liftoff). The browser modules run these kernels; natively only the x86/Arm ones run.
cd ../st5-int8
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
cargo test --release --locked --target wasm32-unknown-unknown
NODE_ARGS=--experimental-wasm-relaxed-simd,--no-liftoff \
  cargo test --release --locked --target wasm32-unknown-unknown --features relaxed-simd
