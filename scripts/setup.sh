#!/usr/bin/env bash
# Installs what st5's build and tests need on a fresh Debian machine:
# - lavapipe (Mesa's Vulkan software driver) for the native wgpu backend without a GPU;
# - for the browser tests: the wasm32 target, Chromium and ChromeDriver (WebGPU on SwiftShader),
#   wasm-pack, the wasm-bindgen test runner at exactly the wasm-bindgen crate's version, and
#   Node.js with npm (the npm package's tests drive Chromium through playwright-core).
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust with rustup (https://rustup.rs)" >&2
  exit 1
fi

need_apt=()
for pkg in mesa-vulkan-drivers libvulkan1 chromium chromium-driver; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# Any Node.js ≥ 18 with npm will do; Debian's packages are used when there is none.
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
if ! wasm-pack --version 2>/dev/null | grep -q "0.15.1"; then
  cargo install wasm-pack --version 0.15.1 --locked
fi
if ! wasm-bindgen-test-runner --version 2>/dev/null | grep -q "0.2.130"; then
  cargo install wasm-bindgen-cli --version 0.2.130
fi

# The shipped model's weights are committed in parts under 20 MiB.
bash "$(dirname "$0")/model-parts.sh" join
