#!/usr/bin/env bash
# Sets up, builds and runs every CPU test (labels unit, mpi, slow; gpu tests need the
# GPU machine: scripts/gpu_session.sh), then each input reader's fuzzer briefly
# (FUZZ_SECONDS per target, default 20; 0 skips; docs/fuzzing.md). This is the README's
# test command.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
export BUILD_DIR=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -LE gpu -j"$(nproc)" --timeout 900
fuzz_seconds=${FUZZ_SECONDS:-20}
if [ "$fuzz_seconds" != 0 ]; then
  FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-$BUILD_DIR-fuzz} "$root/scripts/fuzz.sh" "$fuzz_seconds"
fi
