#!/usr/bin/env bash
# Checks that each patched crate in vendor/ is exactly its crates.io release with its st5.patch
# applied: fetches the release (with cargo, into a scratch CARGO_HOME: a scratch crate that
# depends on `=<version>`), applies the patch to a copy and compares the result with the vendored
# folder, file by file. Needs crates.io, nothing else.
#   bash vendor/check-patch.sh
# To update a patch after changing a vendored crate, diff the fetched release against the folder
# (`git diff --no-index --no-prefix upstream vendored`, from a folder holding both as `a` and `b`).
set -euo pipefail
cd "$(dirname "$0")"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
for patch in */st5.patch; do
  crate=${patch%/st5.patch}
  name=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$crate/Cargo.toml" | head -1)
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$crate/Cargo.toml" | head -1)
  probe="$scratch/probe-$crate"
  mkdir -p "$probe/src"
  touch "$probe/src/lib.rs"
  printf '[package]\nname = "probe"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n%s = "=%s"\n' \
    "$name" "$version" >"$probe/Cargo.toml"
  CARGO_HOME="$scratch/home" cargo fetch --quiet --manifest-path "$probe/Cargo.toml"
  release=("$scratch"/home/registry/src/*/"$name-$version")
  # The release as vendored: without cargo's bookkeeping (.cargo-ok, .cargo_vcs_info.json) and
  # the crate's own Cargo.lock, which cargo ignores in a dependency.
  copy="$scratch/$crate"
  cp -R "${release[0]}" "$copy"
  rm -f "$copy/.cargo-ok" "$copy/.cargo_vcs_info.json" "$copy/Cargo.lock"
  if ! patch --quiet -p1 --fuzz=0 --no-backup-if-mismatch -d "$copy" <"$patch"; then
    echo "vendor/$patch does not apply to $name $version from crates.io" >&2
    failed=1
  elif ! diff -r --exclude=st5.patch "$copy" "$crate"; then
    echo "vendor/$crate is not $name $version from crates.io with st5.patch applied (differences above)" >&2
    failed=1
  else
    echo "vendor/$crate: $name $version from crates.io + st5.patch ... ok"
  fi
done
exit "$failed"
