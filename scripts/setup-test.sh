#!/usr/bin/env bash
# Installs what the test command (scripts/test.sh, which runs this first) needs beyond the main
# job's setup, on a fresh Debian machine; each step is skipped when already done:
# - lavapipe (Mesa's Vulkan software driver) for the native wgpu tests without a GPU;
# - for the browser tests (skipped with ST5_SKIP_BROWSER=1): the wasm32 target, Chromium
#   (WebGPU on SwiftShader), wasm-pack, wasm-bindgen at exactly the wasm-bindgen crate's version
#   (wasm-pack cannot download it offline), and Node.js with npm (the npm package's tests drive
#   Chromium through playwright-core);
# - for the fuzz smoke run (fuzz/smoke.sh): the pinned nightly and cargo-fuzz;
# - for the data-parallel trainer's tests (tests/mpi.rs): Open MPI, and libclang for rsmpi's
#   bindings.
set -euo pipefail
browser=1
[ "${ST5_SKIP_BROWSER:-0}" = 1 ] && browser=0

need_apt=()
pkgs=(mesa-vulkan-drivers libvulkan1 openmpi-bin libopenmpi-dev libclang-dev)
[ "$browser" = 1 ] && pkgs+=(chromium)
for pkg in "${pkgs[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# Any Node.js ≥ 18 with npm will do; Debian's packages are used when there is none. Node also
# runs the JS format check.
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# fuzz/smoke.sh's toolchain: a dated nightly (libFuzzer's coverage flags need one) and cargo-fuzz.
rustup toolchain list | grep -q "^nightly-2026-05-19" ||
  rustup toolchain install nightly-2026-05-19 --profile minimal
if ! cargo fuzz --version 2>/dev/null | grep -q "0.13.1"; then
  cargo install cargo-fuzz --version 0.13.1 --locked
fi

[ "$browser" = 1 ] || exit 0
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
if ! wasm-pack --version 2>/dev/null | grep -q "0.15.1"; then
  cargo install wasm-pack --version 0.15.1 --locked
fi
if ! wasm-bindgen --version 2>/dev/null | grep -q "0.2.130"; then
  cargo install wasm-bindgen-cli --version 0.2.130
fi
