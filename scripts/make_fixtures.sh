#!/usr/bin/env bash
# Writes the tiny test checkpoints (CHECKPOINT.md §6) with the project's own writer.
# usage: make_fixtures.sh <dsv4-mkckpt> <out-dir>
set -euo pipefail
mk=$1; out=$2
mkdir -p "$out"
"$mk" --preset tiny --seed 1 --force --out "$out/tiny"
"$mk" --preset tiny --seed 1 --experts mxfp4 --force --out "$out/tiny-mxfp4"
