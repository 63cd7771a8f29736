#!/usr/bin/env bash
# `wasm-pack test` in headless Chromium: tests/browser/web.rs, the st5-wasm exports called from
# Rust (the file planner, parity on the CPU and WebGPU, errors), run by wasm-bindgen-test-runner
# through ChromeDriver with crates/st5-wasm/webdriver.json's flags (WebGPU on SwiftShader).
# It cannot share the npm package's build (pkg/build.sh, `--profile wasm`): that profile aborts
# on panic, and cargo builds a test and all its dependencies with unwinding, so they would be
# compiled again in any case. The release profile compiles and links fastest of those that run
# burn's kernels at a usable speed.
#   bash scripts/wasm-test.sh     (scripts/setup-test.sh installs wasm-pack, wasm-bindgen-cli,
#                                  which brings wasm-bindgen-test-runner, and chromium-driver)
set -euo pipefail
cd "$(dirname "$0")/../crates/st5-wasm"
# The runner's default 20 s budget covers the whole run; SwiftShader needs more.
export WASM_BINDGEN_TEST_TIMEOUT=600
wasm-pack test --headless --chrome --chromedriver "$(command -v chromedriver)" --release
