#!/usr/bin/env bash
# One GPU-machine session: build with CUDA for sm_90, then
#   1. the gpu-labelled suite (op twins, CPU/CUDA agreement, CUDA G2/G3, determinism) once
#      verbosely, then REPEAT more times in fresh processes, plus REPEAT_FOCUS fresh-process
#      runs of the two tests that guard speculative decoding (CUDA G2/G3, determinism);
#   2. compute-sanitizer's memcheck, initcheck, racecheck and synccheck once each on the
#      GPU test binary (op twins) and on a tiny dsv4-stage run (issue 10);
#   3. the tiny model end to end: CPU vs CUDA, -np 1 / 2 / 4 when the GPUs allow it.
# Logs under $OUT (default build-gpu/session); the summary in $OUT/summary.txt says how
# many runs passed. Exit status 1 when any run failed (one failing run fails the session).
#
# usage: COMMIT=<hash> scripts/gpu_session.sh [--repeat N] [--repeat-focus M]
#                                             [--no-sanitizers] [--no-e2e]
#   --repeat N        further fresh-process runs of `ctest -L gpu` (default 5)
#   --repeat-focus M  fresh-process runs of CUDA G2/G3 and of the determinism test (default 20)
# SANITIZE_LIMIT_S bounds each sanitizer run (default 240 s; rc 124 = ran out of time).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
repeat=5 repeat_focus=20 sanitizers=1 e2e=1 sanitize_limit=${SANITIZE_LIMIT_S:-240}
while [ $# -gt 0 ]; do
  case $1 in
    --repeat) repeat=${2:?--repeat needs a count}; shift 2 ;;
    --repeat-focus) repeat_focus=${2:?--repeat-focus needs a count}; shift 2 ;;
    --no-sanitizers) sanitizers=0; shift ;;
    --no-e2e) e2e=0; shift ;;
    *) echo "gpu_session.sh: unknown option '$1' (see the usage at the top)" >&2; exit 2 ;;
  esac
done
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$repo/build-gpu}
out=${OUT:-$build/session}
mkdir -p "$build" "$out"
summary=$out/summary.txt
failures=0
note() { echo "$*" | tee -a "$summary"; }
failed() { failures=$((failures + 1)); note "FAILED: $*"; }
note "commit ${COMMIT:-unknown} on $(hostname), $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$summary" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

export PATH=/usr/local/cuda/bin:$PATH
t0=$SECONDS
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDSV4_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/configure.log" 2>&1 || { note "configure failed"; tail -40 "$out/configure.log" | tee -a "$summary"; exit 1; }
cmake --build "$build" -j"$(nproc)" >"$out/build.log" 2>&1 \
  || { note "build failed"; grep -E "error" "$out/build.log" | head -40 | tee -a "$summary"; exit 1; }
note "build: $((SECONDS - t0)) s"

# ---- 1. the GPU suite, once verbosely, then repeated in fresh processes ----
t0=$SECONDS
(cd "$build" && ctest -L gpu --output-on-failure --timeout 400 -V) >"$out/ctest-gpu.log" 2>&1 \
  || failed "ctest -L gpu (first run; see ctest-gpu.log)"
note "ctest -L gpu: first run in $((SECONDS - t0)) s"
grep -E "MESSAGE|layer [0-9]+:|logits:|mismatch|rel_l2|determinism:|tests passed|FAILED|ERROR" "$out/ctest-gpu.log" \
  | grep -v "^$" | tail -60 >>"$summary"

passes=0
for i in $(seq 1 "$repeat"); do
  if (cd "$build" && ctest -L gpu --timeout 400) >"$out/ctest-gpu-repeat$i.log" 2>&1; then
    passes=$((passes + 1)); rm -f "$out/ctest-gpu-repeat$i.log"
  else
    failed "ctest -L gpu repeat $i (kept ctest-gpu-repeat$i.log)"
  fi
done
note "ctest -L gpu repeated: $passes/$repeat fresh-process runs passed"

test_gpu=$build/tests/gpu/test_gpu
g2g3='*CUDA G2/G3*'
g_pass=0 d_pass=0
for i in $(seq 1 "$repeat_focus"); do
  "$test_gpu" --test-case="$g2g3" >"$out/g2g3-$i.log" 2>&1 && { g_pass=$((g_pass + 1)); rm -f "$out/g2g3-$i.log"; } \
    || failed "CUDA G2/G3 run $i (kept g2g3-$i.log)"
  (cd "$build" && ctest -R '^gpu_determinism$' --timeout 300 --output-on-failure) >"$out/determinism-$i.log" 2>&1 \
    && { d_pass=$((d_pass + 1)); rm -f "$out/determinism-$i.log"; } || failed "determinism run $i (kept determinism-$i.log)"
done
note "CUDA G2/G3: $g_pass/$repeat_focus fresh-process runs passed; determinism: $d_pass/$repeat_focus passed"

# ---- 2. the sanitizers ----
stage_bin=$build/launcher/dsv4-stage
ckpt=$build/fixtures/tiny
[ -f "$ckpt/config.json" ] || "$build/launcher/dsv4-mkckpt" --preset tiny --seed 1 --force --out "$ckpt" >/dev/null
if [ "$sanitizers" = 1 ]; then
  # The op twins (the whole-model cases and the G2/G3 walk issue ~10^5 launches, hours
  # under the sanitizers; the dsv4-stage run below covers the stage's prefill, decode,
  # verify and commit paths on the device).
  twins='*twin*'
  for tool in memcheck initcheck racecheck synccheck; do
    t=$SECONDS
    timeout "$sanitize_limit" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$test_gpu" --test-case="$twins" --test-case-exclude='*refuses*' >"$out/sanitize-$tool-tests.log" 2>&1
    rc=$?
    note "compute-sanitizer $tool on test_gpu (op twins): rc=$rc in $((SECONDS - t)) s; $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/sanitize-$tool-tests.log" | tail -1)"
    [ $rc = 0 ] || failed "compute-sanitizer $tool on test_gpu"
    t=$SECONDS
    timeout "$sanitize_limit" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$stage_bin" --config "$repo/configs/tiny-cuda.yaml" --model "$ckpt" --max-new 8 \
      --drafter dspark >"$out/sanitize-$tool-stage.log" 2>&1
    rc=$?
    note "compute-sanitizer $tool on dsv4-stage (tiny, dspark, 8 tokens): rc=$rc in $((SECONDS - t)) s; $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/sanitize-$tool-stage.log" | tail -1)"
    [ $rc = 0 ] || failed "compute-sanitizer $tool on dsv4-stage"
  done
fi

# ---- 3. the tiny model end to end ----
mpi=("$repo/scripts/mpirun.sh")
run() {  # name np config [args...]
  local name=$1 np=$2 cfg=$3; shift 3
  local t=$SECONDS
  "${mpi[@]}" -np "$np" "$stage_bin" --config "$repo/configs/$cfg" --model "$ckpt" \
    --log-dir "$out/log-$name" --dump-logits "$out/$name.json" "$@" >"$out/$name.out" 2>"$out/$name.err"
  local rc=$?
  note "run $name (-np $np, $cfg $*): rc=$rc in $((SECONDS - t)) s; $(grep -h tokens: "$out/$name.out" | cut -c1-120)"
  [ $rc = 0 ] || failed "run $name"
  grep -h "decode" "$out/log-$name"/rank0.log 2>/dev/null | tail -1 >>"$summary"
}
same() {  # a b what
  if cmp -s "$out/$1.json" "$out/$2.json"; then note "$3: logits byte-identical"; else failed "$3: logits DIFFER"; fi
}
same_tokens() {  # a b what
  if [ "$(grep -h tokens: "$out/$1.out")" = "$(grep -h tokens: "$out/$2.out")" ]; then note "$3: tokens equal"
  else failed "$3: tokens DIFFER"; fi
}
if [ "$e2e" = 1 ]; then
  run cpu1 1 tiny.yaml --max-new 64
  run cuda1 1 tiny-cuda.yaml
  python3 "$repo/scripts/compare_logits.py" "$out/cpu1.json" "$out/cuda1.json" >>"$summary" 2>&1
  run cuda1_dspark 1 tiny-cuda.yaml --drafter dspark
  same_tokens cuda1 cuda1_dspark "law 3 on GPU (-np 1, dspark vs plain)"
  if [ "${gpus:-0}" -ge 2 ]; then
    run cuda2 2 tiny-cuda.yaml
    run cuda2mpi 2 tiny-cuda-mpi.yaml
    run cuda4 4 tiny-cuda-4rank-2gpu.yaml
    same cuda1 cuda2 "law 1 on GPU: -np 1 vs -np 2 (nccl)"
    same cuda2 cuda2mpi "nccl vs mpi-staged data planes"
    same cuda1 cuda4 "law 1 on GPU: -np 1 vs -np 4 (two ranks per GPU)"
    run cuda2_dspark 2 tiny-cuda.yaml --drafter dspark
    run cuda2_replay 2 tiny-cuda.yaml --drafter "replay:$out/cuda2.json"
    same_tokens cuda2 cuda2_dspark "law 3 on GPU (-np 2, dspark)"
    same_tokens cuda2 cuda2_replay "law 3 on GPU (-np 2, replay)"
  else
    note "one GPU visible: the -np 2 / -np 4 runs are skipped"
  fi
fi
note "done: $failures failure(s)"
# The device tool returns few files: keep summary and the gpu test log, pack the rest.
tar -czf /tmp/dsv4-logs.tar.gz -C "$out" --exclude=summary.txt --exclude=ctest-gpu.log . \
  && find "$out" -mindepth 1 ! -name summary.txt ! -name ctest-gpu.log -delete \
  && mv /tmp/dsv4-logs.tar.gz "$out/logs.tar.gz"
[ "$failures" = 0 ]
