#!/usr/bin/env bash
# Checks that every #include "..." of the engine's folders follows the layer order of
# docs/architecture.md ("Layers of the source tree"): a folder includes itself and the
# folders below it, never one above or beside it, and every project include is rooted at
# the repository (no "../"). Prints each violation as FILE:LINE: folder -> included; exits 1
# when there is one.
# usage: check_layers.sh [ROOT]   (default: the repository holding this script)
#        check_layers.sh --self-test   (shows that a back-up include is caught)
set -euo pipefail

# What each folder may include besides itself (the layer order, top to bottom).
declare -A allowed=(
  [launcher]="stage comm kernels model base"
  [stage]="comm kernels model base"
  [kernels]="model base"
  [comm]="base"
  [model]="base"
  [base]=""
)
layers=(launcher stage kernels comm model base)

check_tree() {
  local root=$1 bad=0 folder file line included
  for folder in "${layers[@]}"; do
    [ -d "$root/$folder" ] || continue
    while IFS= read -r -d '' file; do
      while IFS=: read -r line included; do
        local top=${included%%/*}
        if [ "$top" = "$included" ] || [ "$top" = ".." ] || [ "$top" = "." ]; then
          echo "${file#"$root"/}:$line: include \"$included\" is not rooted at the repository"
          bad=1
        elif [ "$top" != "$folder" ] && [[ " ${allowed[$folder]} " != *" $top "* ]]; then
          echo "${file#"$root"/}:$line: $folder -> $top (\"$included\") runs against the layer order"
          bad=1
        fi
      done < <(awk -F'"' '/^[ \t]*#[ \t]*include[ \t]*"/ { print FNR ":" $2 }' "$file")
    done < <(find "$root/$folder" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' \
                                             -o -name '*.cuh' \) -print0)
  done
  return $bad
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/model" "$tmp/comm" "$tmp/stage"
  printf '#include "model/config.h"\n#include "stage/stage.h"\n' > "$tmp/model/bad.cpp"
  printf '#include "base/error.h"\n#include "model/config.h"\n' > "$tmp/comm/bad.h"
  printf '#include "../launcher/cli.h"\n#include "kernels/ops.h"\n' > "$tmp/stage/bad.cu"
  local out
  if out=$(check_tree "$tmp"); then
    echo "self-test: the checker passed a tree with back-up includes"; return 1
  fi
  local want
  for want in 'model/bad.cpp:2: model -> stage' 'comm/bad.h:2: comm -> model' \
              'stage/bad.cu:1: include "../launcher/cli.h" is not rooted'; do
    grep -qF "$want" <<< "$out" || { echo "self-test: missed '$want' in:"; echo "$out"; return 1; }
  done
  [ "$(wc -l <<< "$out")" -eq 3 ] || { echo "self-test: flagged allowed includes:"; echo "$out"; return 1; }
  echo "self-test: the checker reports all 3 violations and nothing else"
}

if [ "${1:-}" = "--self-test" ]; then
  self_test
  exit
fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
if check_tree "$root"; then
  echo "layer order: every include of ${layers[*]} runs downward"
else
  exit 1
fi
