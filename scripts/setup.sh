#!/usr/bin/env bash
# Installs what st5's native build and tests need on a fresh Debian machine: the Rust toolchain
# (if absent) and lavapipe, Mesa's Vulkan software driver, for the wgpu backend without a GPU.
set -euo pipefail

need_apt=()
for pkg in mesa-vulkan-drivers libvulkan1; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust with rustup (https://rustup.rs)" >&2
  exit 1
fi
