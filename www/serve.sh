#!/usr/bin/env bash
# Builds the npm package (pkg/build.sh) and serves the demo page on localhost; prints the URL.
# First installs what the build needs and is missing (scripts/setup-pkg.sh: Node, the wasm32
# target, wasm-bindgen-cli), so it works after the README's step 1 alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-pkg.sh
bash scripts/model-parts.sh join   # the default model's weights, committed in parts
bash pkg/build.sh
exec node www/serve.mjs "$@"
