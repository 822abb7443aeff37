#!/usr/bin/env bash
# Sets up, builds, writes the tiny checkpoint and runs the main job on it: two MPI
# ranks on the CPU backend: greedy generation from token ids, then text in and text out
# (the tiny checkpoint's tokenizer; its weights are random, so the text is too). This is
# the README's main command. Extra arguments go to the id run (e.g. --max-new 16
# --prompt-ids 5,6,7).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
export BUILD_DIR=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
ckpt="$BUILD_DIR/fixtures/tiny"
if [ ! -f "$ckpt/config.json" ]; then
  "$BUILD_DIR/launcher/dsv4-mkckpt" --preset tiny --seed 1 --out "$ckpt"
fi
stage=("$root/scripts/mpirun.sh" -np 2 "$BUILD_DIR/launcher/dsv4-stage"
       --config "$root/configs/tiny.yaml" --model "$ckpt")
"${stage[@]}" "$@"
prompt="Hello, world!"
echo "text in: \"$prompt\" -> ids $("$BUILD_DIR/launcher/dsv4-tokenize" --tokenizer "$ckpt" --bos \
  --encode "$prompt")" >&2
echo "text out (greedy, then sampled with seed 1):" >&2
"${stage[@]}" --prompt "$prompt" --max-new 16
"${stage[@]}" --prompt "$prompt" --chat --max-new 16 --temperature 0.8 --top-p 0.95 --seed 1
