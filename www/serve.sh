#!/usr/bin/env bash
# Builds the npm package (pkg/build.sh) and serves the demo page on localhost; prints the URL.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/model-parts.sh join   # the default model's weights, committed in parts
bash pkg/build.sh
exec node www/serve.mjs "$@"
