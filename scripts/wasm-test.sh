#!/usr/bin/env bash
# The wasm crate's browser tests in headless Chromium: tests/browser/web.rs, the st5-wasm exports
# called from Rust (the file planner, parity on the CPU and WebGPU, errors), run by
# wasm-bindgen-test-runner (cargo's runner for wasm32) through ChromeDriver with
# crates/st5-wasm/webdriver.json's flags (WebGPU on SwiftShader). This is what `wasm-pack test
# --headless --chrome` runs, without a tool that a fresh machine compiles from source.
# Built with the npm package's profile (`--profile wasm`, as pkg/build.sh), so the test runs the
# code that ships, and reuses the package build's dependencies instead of compiling them again.
# Then st5-int8's kernel tables on wasm32 in Node (below).
#   bash scripts/wasm-test.sh     (scripts/setup-test.sh installs wasm-bindgen-cli, which brings
#                                  wasm-bindgen-test-runner, and chromium-driver)
set -euo pipefail
cd "$(dirname "$0")/../crates/st5-wasm"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
# The runner's default 20 s budget covers the whole run; SwiftShader needs more.
export WASM_BINDGEN_TEST_TIMEOUT=600
# In the browser (headless unless NO_HEADLESS is set), driven by this ChromeDriver; the runner
# reads webdriver.json from the crate folder, where cargo starts it.
CHROMEDRIVER=$(command -v chromedriver) WASM_BINDGEN_TEST_ONLY_WEB=1 \
  cargo test --profile wasm --locked --target wasm32-unknown-unknown
# st5-int8's kernel tables (every kernel equal to the scalar one bit for bit) on wasm32, in Node:
# the SIMD128 kernel, then with the `relaxed-simd` feature the relaxed one too (V8 validates
# relaxed SIMD behind a flag in Node 20; the optimizing tier, as the kernel's documentation says
# why not Liftoff). The browser modules run these kernels; natively only the x86/Arm ones run.
cd ../st5-int8
cargo test --release --locked --target wasm32-unknown-unknown
NODE_ARGS=--experimental-wasm-relaxed-simd,--no-liftoff \
  cargo test --release --locked --target wasm32-unknown-unknown --features relaxed-simd
