#!/usr/bin/env bash
# Sets up, builds, writes the tiny checkpoint and runs the main job on it: two MPI
# ranks on the CPU backend, greedy generation. This is the README's main command.
# Extra arguments go to dsv4-stage (e.g. --max-new 16 --prompt-ids 5,6,7).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
export BUILD_DIR=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
ckpt="$BUILD_DIR/fixtures/tiny"
if [ ! -f "$ckpt/config.json" ]; then
  "$BUILD_DIR/launcher/dsv4-mkckpt" --preset tiny --seed 1 --out "$ckpt"
fi
exec "$root/scripts/mpirun.sh" -np 2 "$BUILD_DIR/launcher/dsv4-stage" \
  --config "$root/configs/tiny.yaml" --model "$ckpt" "$@"
