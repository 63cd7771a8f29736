#!/usr/bin/env bash
# Installs a cargo tool at a pinned version (the setup scripts' one way to do it), unless that
# version is on PATH already:
#   bash scripts/cargo-install.sh CRATE VERSION [CARGO INSTALL FLAGS...]
# Built at opt-level 1 without LTO: these tools (cargo-fuzz, wasm-bindgen-cli) run for seconds in
# a test run, but compiling them at the crates' own release settings took most of a fresh
# machine's setup (wasm-bindgen-cli alone 4m55s on 2 cores).
set -euo pipefail
crate=$1 version=$2
shift 2
# The version on PATH, or nothing where the tool is missing (its --version then fails).
case $crate in
  wasm-bindgen-cli) have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true) ;;
  cargo-fuzz) have=$(cargo fuzz --version 2>/dev/null | awk '{ print $2 }' || true) ;;
  *) have=$("$crate" --version 2>/dev/null | awk '{ print $2 }' || true) ;;
esac
[ "$have" = "$version" ] && exit 0
CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  CARGO_PROFILE_RELEASE_DEBUG=false cargo install "$crate" --version "$version" "$@"
