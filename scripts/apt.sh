#!/usr/bin/env bash
# Installs the Debian packages named that are not installed yet (apt-get update first, as root or
# through sudo); installs nothing, and needs no root, when all are there. The setup scripts use it.
#   bash scripts/apt.sh PACKAGE...
set -euo pipefail
# One apt run at a time (scripts/setup-test.sh runs one in the background): a second waits here,
# then installs only what the first did not.
exec 9>"${TMPDIR:-/tmp}/st5-apt.lock"
flock 9
need=()
for pkg in "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -gt 0 ] || exit 0
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
