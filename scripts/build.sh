#!/usr/bin/env bash
# Configures and builds the CPU engine into ${BUILD_DIR:-build} (CUDA off unless
# DSV4_CUDA=ON is exported). Usage: scripts/build.sh [extra cmake args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDSV4_CUDA="${DSV4_CUDA:-OFF}" \
  -DDSV4_REQUIRE_TEXT=ON "$@" >&2
cmake --build "$build" -j"$(nproc)" >&2
