#!/usr/bin/env bash
# The decode-speed loop of issue 12 on the GPU machine, in one call: build the GPU test
# binary and the two benchmarks for sm_90, validate (every CUDA op twin, CUDA G2/G3 verify
# rows == single steps, the tiny model CPU vs CUDA), then time (dsv4-bench-ops at Flash
# shapes; dsv4-dev-gemv, the GEMV variants; dsv4-bench-decode, the whole model at the given
# contexts). Validation failing
# skips the timing: a figure of wrong kernels is not a figure.
# Logs and JSON under $OUT (default build-gpu/perf); exit 1 when a validation failed.
#
# usage: COMMIT=<hash> scripts/gpu_perf.sh [--contexts LIST] [--verify-rows LIST]
#                                          [--ops-rows LIST] [--accept-lens LIST] [--prefill-lens LIST]
#                                          [--no-decode]
#   --accept-lens LIST  also speculative rounds at these mean acceptance lengths (issue 15)
#   --prefill-lens LIST also the time to first token of prompts of these lengths (issue 13)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
contexts=4096,65536 verify_rows=1,4 ops_rows=1,4 accept_lens= prefill_lens= decode=1
while [ $# -gt 0 ]; do
  case $1 in
    --contexts) contexts=${2:?--contexts needs a list}; shift 2 ;;
    --verify-rows) verify_rows=${2:?--verify-rows needs a list}; shift 2 ;;
    --ops-rows) ops_rows=${2:?--ops-rows needs a list}; shift 2 ;;
    --accept-lens) accept_lens=${2:?--accept-lens needs a list}; shift 2 ;;
    --prefill-lens) prefill_lens=${2:?--prefill-lens needs a list}; shift 2 ;;
    --no-decode) decode=0; shift ;;
    *) echo "gpu_perf.sh: unknown option '$1' (see the usage at the top)" >&2; exit 2 ;;
  esac
done
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$repo/build-gpu}
out=${OUT:-$build/perf}
commit=${COMMIT:-unknown}
mkdir -p "$build" "$out"
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
note "commit $commit on $(hostname), $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$summary" 2>&1

export PATH=/usr/local/cuda/bin:$PATH
t0=$SECONDS
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDSV4_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/configure.log" 2>&1 || { note "configure failed"; tail -40 "$out/configure.log" | tee -a "$summary"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target test_gpu dsv4-stage dsv4-bench-ops dsv4-bench-decode dsv4-mkckpt dsv4-dev-gemv \
  >"$out/build.log" 2>&1 || { note "build failed"; grep -E "error" "$out/build.log" | head -40 | tee -a "$summary"; exit 1; }
note "build: $((SECONDS - t0)) s"

# ---- validate: the op twins and the stage laws on the tiny fixture ----
t0=$SECONDS
(cd "$build" && ctest -R '^fixture_tiny' >"$out/fixture.log" 2>&1) || { note "tiny fixture failed"; exit 1; }
if "$build/tests/gpu/test_gpu" >"$out/test_gpu.log" 2>&1; then
  note "test_gpu: $(grep -E '^\[doctest\] (test cases|assertions)' "$out/test_gpu.log" | tr '\n' ' ') ($((SECONDS - t0)) s)"
else
  note "FAILED: test_gpu (see test_gpu.log)"
  grep -E "ERROR|error:|mismatch|worst" "$out/test_gpu.log" | head -40 | tee -a "$summary"
  exit 1
fi

# ---- time ----
"$build/bench/dsv4-dev-gemv" >"$out/gemv_variants.txt" 2>&1 || note "FAILED: dsv4-dev-gemv (see gemv_variants.txt)"
cat "$out/gemv_variants.txt" >>"$summary"
"$build/bench/dsv4-bench-ops" --rows "$ops_rows" --json "$out/ops.json" --label "$commit" \
  >"$out/ops.txt" 2>&1 || note "FAILED: dsv4-bench-ops (see ops.txt)"
cat "$out/ops.txt" >>"$summary"
if [ "$decode" = 1 ]; then
  "$build/bench/dsv4-bench-decode" --contexts "$contexts" --verify-context 4096 --verify-rows "$verify_rows" \
    ${accept_lens:+--accept-lens "$accept_lens"} ${prefill_lens:+--prefill-lens "$prefill_lens"} --steps 10 --json "$out/decode.json" --label "$commit" >"$out/decode.txt" 2>&1 \
    || note "FAILED: dsv4-bench-decode (see decode.txt)"
  cat "$out/decode.txt" >>"$summary"
fi
note "done $(date -u +%FT%TZ)"
