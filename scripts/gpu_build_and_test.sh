#!/usr/bin/env bash
# Builds the CUDA backend and its twin tests for sm_90 and runs `ctest -L gpu` (issue 5).
# usage: scripts/gpu_build_and_test.sh [build-dir]   (default: build-gpu in the repository)
# Env: OUT (if set, logs go there: env.log, configure.log, build.log, ctest.log, summary.txt),
#      JOBS (build parallelism, default: all cores).
# Exit status: 0 when every gpu test passed; the failing stage's status otherwise.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build-gpu}
logs=${OUT:-$build/gpu-logs}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
mkdir -p "$build" "$logs"
summary=$logs/summary.txt
: >"$summary"

note() { echo "$*" | tee -a "$summary"; }

# Runs one stage with its output in $logs/<name>.log; stops the script on failure.
stage() {
  local name=$1; shift
  local start=$SECONDS
  "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  note "$name: rc=$rc in $((SECONDS - start)) s (log: $logs/$name.log)"
  if [ $rc -ne 0 ]; then
    note "---- last 60 lines of $name.log ----"
    tail -n 60 "$logs/$name.log" | tee -a "$summary"
    exit $rc
  fi
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname)"
  echo "repo: $repo  build: $build  jobs: $jobs"
  (cd "$repo" && git rev-parse HEAD 2>/dev/null && git status --short 2>/dev/null | head -50)
  command -v nvidia-smi >/dev/null && nvidia-smi
  command -v nvcc >/dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version
  cmake --version | head -1
} >"$logs/env.log" 2>&1
note "environment: $logs/env.log"

cuda_bin=/usr/local/cuda/bin
if ! command -v nvcc >/dev/null && [ -x "$cuda_bin/nvcc" ]; then export PATH=$cuda_bin:$PATH; fi

stage configure cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDSV4_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90
stage build cmake --build "$build" --target test_gpu -j "$jobs"

start=$SECONDS
(cd "$build" && ctest -L gpu -V --output-on-failure --timeout 480 -O "$logs/ctest.log") \
  >"$logs/ctest-console.log" 2>&1
rc=$?
note "ctest -L gpu: rc=$rc in $((SECONDS - start)) s (full output with measured errors: $logs/ctest.log)"
grep -E "rel_l2=|Test +#|tests passed|ERROR|FAILED|CHECK" "$logs/ctest.log" | tail -n 200 >>"$summary"
exit $rc
