#!/usr/bin/env bash
# The test command. Installs the test tools (scripts/setup-test.sh), then:
# 1. checks format: `cargo fmt --check`, Prettier over the JS, vendor/check-patch.sh (each
#    vendored crate is its crates.io release plus its st5.patch); clippy, with warnings denied,
#    lints every workspace crate inside the builds that follow;
# 2. builds the `st5` and `trainer` binaries (and `trainer-mpi`, with the `mpi` feature, which
#    tests/mpi.rs runs under `mpirun -np 2`) and the native tests, in one release build;
# 3. then two lanes side by side, each printing its output: the native lane runs every native
#    test (the CLI tests drive the binary; the parity tests run on flex and on wgpu), the fuzz
#    smoke run (fuzz/smoke.sh: each cargo-fuzz target for a few seconds) and the wasm crate's
#    own tests (scripts/wasm-test.sh: its exports from Rust in Chromium, built with the
#    package's profile); the front lane builds the npm package (pkg/build.sh: its SIMD128 and
#    relaxed-SIMD modules) and runs the browser tests in headless Chromium (WebGPU and CPU),
#    through Playwright: the package packed and installed into a scratch app, the demo page
#    (www/), memory held flat over long sessions, the package in Node.js, and the package built
#    into an app by Vite and webpack; the package's core paths in Firefox and WebKit too
#    (engines.test.mjs).
# Prints the total: tests passed, failed, and skipped (libtest's ignored, and each `skipped:`
# line a test prints when an opt-out such as ST5_SKIP_WGPU=1 leaves out part or all of it; a
# test that ran its other parts is counted in passed too).
# ST5_SKIP_BROWSER=1 skips the browser tests on a machine without Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
# tests/serve.rs drives `st5 serve` with the real Python clients from this venv.
export ST5_CLIENTS_VENV=${ST5_CLIENTS_VENV:-/var/tmp/st5-clients}
export ST5_CLIENTS_PYTHON=$ST5_CLIENTS_VENV/bin/python
# Each step's wall time, printed above the total: where a run's time goes.
timings=()
step_start=$SECONDS
step() {
  timings+=("$(printf '%6d s  %s' $((SECONDS - step_start)) "$1")")
  step_start=$SECONDS
}
bash scripts/setup-test.sh
bash scripts/model-parts.sh join   # models/*/model.safetensors, committed in parts
step "install the test tools (scripts/setup-test.sh)"

# Format first: it takes seconds, and a failure here is the cheapest to read.
cargo fmt --all --check
(cd tests/browser && npm ci --no-audit --no-fund --omit=optional)   # Prettier, playwright-core
tests/browser/node_modules/.bin/prettier --check .
# vendor/: each patched crate is its crates.io release plus its st5.patch, nothing else.
bash vendor/check-patch.sh
step "format checks (cargo fmt, Prettier, vendor patches)"

# Clippy lints inside the builds below instead of in a check build of its own: cargo hands each
# workspace crate to clippy-driver (RUSTC_WORKSPACE_WRAPPER, as `cargo clippy` does), which lints
# it and then compiles it as rustc would; dependencies compile as usual. A separate `cargo clippy`
# type-checked every dependency once more (13m23s of a fresh machine's run). Every target the
# tests build is linted with warnings denied: the binaries with and without `mpi`, each crate's
# tests and examples (cargo test), and st5-wasm and its browser tests for wasm32 (pkg/build.sh,
# scripts/wasm-test.sh). CLIPPY_ARGS is how cargo-clippy passes `-D warnings` to the driver.
export RUSTC_WORKSPACE_WRAPPER=clippy-driver CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# The trainer with MPI (the `mpi` feature) for tests/mpi.rs, kept as `trainer-mpi`; then the
# plain binaries (both builds stay cached, so the switch is a relink).
bin=${CARGO_TARGET_DIR:-target}/release
cargo build --release --locked --bin st5 --bin trainer --features st5-trainer/mpi
cp "$bin/trainer" "$bin/trainer-mpi"
cargo build --release --locked --bin st5 --bin trainer
step "release build (st5, trainer, trainer-mpi)"
log=$(mktemp)
lane=$(mktemp)
trap 'rm -f "$log" "$lane"; [ -z "${native:-}" ] || kill -- -"$native" 2>/dev/null || true' EXIT
# default-members: every crate but st5-wasm, the feature set `cargo build` used just above. Built
# here, so that the run below compiles nothing.
cargo test --release --locked --no-run
step "native test build (cargo test --no-run)"

# The native lane: the workspace's tests, then every parser of outside bytes fuzzed for a few
# seconds each from its corpus (nightly, which has no clippy here), then the wasm crate's tests
# (after pkg/build.sh, whose dependencies they share: cargo's lock makes them wait for it). Each
# part prints its time as a `lane-step:` line.
native_lane() {
  local t=$SECONDS
  cargo test --release --locked -- --test-threads 1
  echo "lane-step: $((SECONDS - t)) native tests (cargo test)" && t=$SECONDS
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS bash fuzz/smoke.sh
  echo "lane-step: $((SECONDS - t)) fuzz smoke run" && t=$SECONDS
  if [ "${ST5_SKIP_BROWSER:-0}" != 1 ]; then
    bash scripts/wasm-test.sh
    echo "lane-step: $((SECONDS - t)) wasm crate tests (scripts/wasm-test.sh)"
  fi
}
if [ "${ST5_SKIP_BROWSER:-0}" = 1 ]; then
  native_lane 2>&1 | tee -a "$log"
else
  # Beside the package build and the browser tests: on 2 cores neither lane keeps both busy all
  # the time (the native tests run one at a time, a fat-LTO link is one thread, the browser tests
  # wait on their pages); on a fresh machine the run took 6 minutes less. Its own process group
  # (set -m), so that a failure in front stops it; its output is printed when it ends.
  set -m
  native_lane </dev/null >"$lane" 2>&1 &
  native=$!
  set +m
  bash pkg/build.sh 2>&1 | tee -a "$log"
  step "npm package build (pkg/build.sh), beside the native lane"
  (cd tests/browser && node npm.test.mjs && node demo.test.mjs && node memory.test.mjs && node node.test.mjs &&
    node bundler.test.mjs && node engines.test.mjs) 2>&1 | tee -a "$log"
  step "browser and Node tests, beside the native lane"
  status=0
  wait "$native" || status=$?
  native=
  echo "---- the native lane (native tests, fuzz smoke run, wasm crate tests) ----"
  tee -a "$log" <"$lane"
  step "waiting for the native lane"
  [ "$status" = 0 ] || { echo "the native lane failed (exit $status): its output is above" >&2; exit "$status"; }
fi
# The native lane's own steps, after the front's.
while read -r _ secs name; do
  timings+=("$(printf '%6d s  %s' "$secs" "$name (native lane)")")
done < <(grep '^lane-step: ' "$log")
printf '%s\n' "time per step:" "${timings[@]}" "$(printf '%6d s  %s' "$SECONDS" "in all")"
# Each skip is named with its reason above the total: libtest's ignored tests by name, and every
# `skipped:` line as the test printed it.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     /^test .* \.\.\. ignored/ { why[++n] = "skipped: " $2 ": #[ignore]" }
     /^skipped: / { s++; why[++n] = $0 }
     END { for (i = 1; i <= n; i++) print why[i]; printf "total: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
