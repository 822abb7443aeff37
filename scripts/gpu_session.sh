#!/usr/bin/env bash
# One GPU-machine session (issue 5/6): build with CUDA for sm_90, run the gpu-labelled
# tests (op twins, whole-model CPU/CUDA agreement, GPU split invariance), then the tiny
# model end to end: CPU reference vs CUDA at -np 1 and -np 2 (NCCL and MPI staging),
# and, when the drafter is available, speculative vs plain greedy on two GPUs.
# Logs under $OUT (default build-gpu/session); a summary in $OUT/summary.txt.
# usage: COMMIT=<hash> scripts/gpu_session.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build-gpu
out=${OUT:-$build/session}
mkdir -p "$build" "$out"
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
note "commit ${COMMIT:-unknown} on $(hostname), $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$summary" 2>&1

export PATH=/usr/local/cuda/bin:$PATH
t0=$SECONDS
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDSV4_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/configure.log" 2>&1 || { note "configure failed"; tail -40 "$out/configure.log" | tee -a "$summary"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target dsv4-stage dsv4-mkckpt test_gpu >"$out/build.log" 2>&1 \
  || { note "build failed"; grep -E "error" "$out/build.log" | head -40 | tee -a "$summary"; exit 1; }
note "build: $((SECONDS - t0)) s"

t0=$SECONDS
(cd "$build" && ctest -L gpu --output-on-failure --timeout 400 -V) >"$out/ctest-gpu.log" 2>&1
note "ctest -L gpu: rc=$? in $((SECONDS - t0)) s"
grep -E "MESSAGE|layer [0-9]+:|logits:|mismatch|rel_l2|passed|failed|FAILED|ERROR" "$out/ctest-gpu.log" \
  | grep -v "^$" | tail -80 >>"$summary"

mpi=("$repo/scripts/mpirun.sh")
stage_bin=$build/launcher/dsv4-stage
ckpt=$build/fixtures/tiny
[ -f "$ckpt/config.json" ] || "$build/launcher/dsv4-mkckpt" --preset tiny --seed 1 --force --out "$ckpt" >/dev/null
run() {  # name np config [args...]
  local name=$1 np=$2 cfg=$3; shift 3
  local t=$SECONDS
  "${mpi[@]}" -np "$np" "$stage_bin" --config "$repo/configs/$cfg" --model "$ckpt" \
    --log-dir "$out/log-$name" --dump-logits "$out/$name.json" "$@" >"$out/$name.out" 2>"$out/$name.err"
  note "run $name (-np $np, $cfg $*): rc=$? in $((SECONDS - t)) s; $(grep -h tokens: "$out/$name.out" | cut -c1-120)"
  grep -h "decode" "$out/log-$name"/rank0.log 2>/dev/null | tail -1 >>"$summary"
}
run cpu1 1 tiny.yaml --max-new 64
run cuda1 1 tiny-cuda.yaml
run cuda2 2 tiny-cuda.yaml
run cuda2mpi 2 tiny-cuda-mpi.yaml
run cuda4 4 tiny-cuda-4rank-2gpu.yaml
cmp -s "$out/cuda1.json" "$out/cuda4.json" && note "law 1 on GPU: -np 1 and -np 4 (two ranks per GPU, mpi data plane) logits byte-identical" \
  || note "law 1 on GPU: -np 1 and -np 4 logits DIFFER"
cmp -s "$out/cuda1.json" "$out/cuda2.json" && note "law 1 on GPU: -np 1 and -np 2 (nccl) logits byte-identical" \
  || note "law 1 on GPU: -np 1 and -np 2 (nccl) logits DIFFER"
cmp -s "$out/cuda2.json" "$out/cuda2mpi.json" && note "nccl and mpi-staged data planes: logits byte-identical" \
  || note "nccl and mpi-staged data planes: logits DIFFER"
python3 "$repo/scripts/compare_logits.py" "$out/cpu1.json" "$out/cuda2.json" >>"$summary" 2>&1

if "$stage_bin" --help | grep -q "dspark" && ! "$stage_bin" --help | grep -q "not available"; then
  run cuda2_dspark 2 tiny-cuda.yaml --drafter dspark
  run cuda2_replay 2 tiny-cuda.yaml --drafter "replay:$out/cuda2.json"
  for n in cuda2_dspark cuda2_replay; do
    if [ "$(grep -h tokens: "$out/$n.out")" = "$(grep -h tokens: "$out/cuda2.out")" ]; then
      note "law 3 on GPU ($n): speculative tokens equal plain greedy"
    else
      note "law 3 on GPU ($n): tokens DIFFER from plain greedy"
    fi
  done
  grep -h -i "accept\|round" "$out/log-cuda2_dspark"/rank0.log 2>/dev/null | tail -3 >>"$summary"
fi
note "done"
# The device tool returns few files: keep summary and the gpu test log, pack the rest.
tar -czf /tmp/dsv4-logs.tar.gz -C "$out" --exclude=summary.txt --exclude=ctest-gpu.log . \
  && find "$out" -mindepth 1 ! -name summary.txt ! -name ctest-gpu.log -delete \
  && mv /tmp/dsv4-logs.tar.gz "$out/logs.tar.gz"
