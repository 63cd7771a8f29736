#!/usr/bin/env bash
# Installs what the test command (scripts/test.sh, which runs this first) needs beyond the main
# job's setup, on a fresh Debian machine; each step is skipped when already done:
# - lavapipe (Mesa's Vulkan software driver) for the native wgpu tests without a GPU;
# - Node.js and, for the browser tests (skipped with ST5_SKIP_BROWSER=1), the npm package's
#   build tools: scripts/setup-pkg.sh;
# - for the browser tests: Chromium (WebGPU on SwiftShader) and ChromeDriver (`wasm-pack test
#   --chrome`), Firefox ESR, and WebKitGTK's WebDriver with Xvfb (the other two engines of
#   tests/browser/engines.test.mjs); the tests drive them through playwright-core and
#   puppeteer-core, which never download a browser;
# - for the fuzz smoke run (fuzz/smoke.sh): the pinned nightly and cargo-fuzz;
# - for the data-parallel trainer's tests (tests/mpi.rs): Open MPI, and libclang for rsmpi's
#   bindings.
set -euo pipefail
browser=1
[ "${ST5_SKIP_BROWSER:-0}" = 1 ] && browser=0

pkgs=(mesa-vulkan-drivers libvulkan1 openmpi-bin libopenmpi-dev libclang-dev)
[ "$browser" = 1 ] && pkgs+=(chromium chromium-driver firefox-esr webkit2gtk-driver xvfb)
bash "$(dirname "$0")/apt.sh" "${pkgs[@]}"

# fuzz/smoke.sh's toolchain: a dated nightly (libFuzzer's coverage flags need one) and cargo-fuzz.
rustup toolchain list | grep -q "^nightly-2026-05-19" ||
  rustup toolchain install nightly-2026-05-19 --profile minimal
if ! cargo fuzz --version 2>/dev/null | grep -q "0.13.1"; then
  cargo install cargo-fuzz --version 0.13.1 --locked
fi

bash "$(dirname "$0")/setup-pkg.sh"
