#!/usr/bin/env bash
# Shipped weights are committed in parts under 20 MiB (git hosts refuse or slow down larger
# files): models/*/model.safetensors.part<N>, and a recipe's finished stages the same way
# (trainer/recipes/*/stages/*/, kept so that a run resumes on a new machine). `join` (the default;
# setup.sh, test.sh and www/serve.sh run it) writes model.safetensors from them when it is missing
# or older than a part; `split` re-cuts the parts after a retrained model.safetensors, before
# committing it. Directories can be named after the mode; the default is models/*/.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-join}
shift || true
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(models/*/)
for dir in "${dirs[@]}"; do
  dir="${dir%/}/"
  full="${dir}model.safetensors"
  case "$mode" in
    join)
      parts=("${dir}"model.safetensors.part*)
      [ -e "${parts[0]}" ] || continue
      stale=0
      [ -f "$full" ] || stale=1
      for p in "${parts[@]}"; do [ "$p" -nt "$full" ] && stale=1; done
      if [ "$stale" = 1 ]; then
        cat "${parts[@]}" > "$full.tmp" && mv "$full.tmp" "$full"
        echo "joined $full from ${#parts[@]} parts"
      fi
      ;;
    split)
      [ -f "$full" ] || continue
      rm -f "${dir}"model.safetensors.part*
      split -b 16M -d -a 1 "$full" "${full}.part"
      echo "split $full into $(ls "${dir}"model.safetensors.part* | wc -l) parts"
      ;;
    *) echo "usage: $0 [join|split]" >&2; exit 2 ;;
  esac
done
