#!/usr/bin/env bash
# No rank hangs when a middle rank fails (ARCHITECTURE.md control plane). Modes:
#   load   rank 1's layer 3 has a NaN scale code (a corrupted copy of the checkpoint):
#          start-up failure, the agreement path
#   error  rank 1 throws before its operation 2 (DSV4_FAULT_INJECT=1:2:error): the
#          run-time error broadcast
#   kill   rank 1 is SIGKILLed before its operation 2 (DSV4_FAULT_INJECT=1:2:kill):
#          mpirun's own job abort
#   error-chunked  as error, in the middle of a chunked prefill (--prefill-chunk 5: the
#          16-token prompt is operations 0..3), while rank 0 has headers in flight
# Every rank must end non-zero within 20 s; the failing message must appear once.
# usage: rank_failure.sh <mode> <dsv4-stage> <model dir> <configs dir> <work dir>
MODE=$1; EXE=$2; MODEL=$3; CONFIGS=$4; WORK=$5
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
model=$MODEL; fault=; flags=()
case "$MODE" in
  load)
    model=$WORK/ckpt; mkdir -p "$model"; cp "$MODEL"/* "$model"/
    tensor=layers.3.attn.wq_a.scale
    shard=$model/$(cmake -DINDEX="$model/model.safetensors.index.json" -DTENSOR=$tensor \
                     -P "$(dirname "$0")/tensor_shard.cmake")
    header_len=$(od -An -tu8 -N8 "$shard" | tr -d ' ')
    begin=$(cmake -DSHARD="$shard" -DHEADER_LEN="$header_len" -DTENSOR=$tensor \
              -P "$(dirname "$0")/tensor_offset.cmake")
    printf '\xff' | dd of="$shard" bs=1 seek=$((8 + header_len + begin)) conv=notrunc 2>/dev/null
    expected="E8M0 scale code 0xFF" ;;
  error) fault=1:2:error; expected="injected failure before operation 2" ;;
  kill) fault=1:2:kill; expected= ;;
  error-chunked) fault=1:2:error; expected="injected failure before operation 2"
    flags=(--prefill-chunk 5) ;;
  *) fail "unknown mode $MODE" ;;
esac
start=$(date +%s)
set +e
DSV4_FAULT_INJECT=$fault timeout 20 "$MPIRUN" "${mpirun_flags[@]}" -x DSV4_FAULT_INJECT -np 3 \
  "$EXE" --config "$CONFIGS/tiny-np3.yaml" --model "$model" --max-new 32 \
  --log-dir "$WORK/logs" "${flags[@]}" > "$WORK/out.txt" 2>&1
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
cat "$WORK/out.txt"
[ "$rc" != 124 ] || fail "the job hung (killed after 20 s)"
[ "$rc" != 0 ] || fail "the job exited 0"
! grep -q '^tokens:' "$WORK/out.txt" || fail "tokens printed despite the failure"
for r in 0 2; do
  [ "$(count_of 'exit status 0' "$WORK/logs/rank$r.log")" = 0 ] || fail "rank $r exited 0"
done
if [ -n "$expected" ]; then
  [ "$(count_of "$expected" "$WORK/out.txt")" = 1 ] || fail "the failing message is not printed exactly once"
  for r in 0 2; do
    [ "$(count_of "rank $r: stopping because rank 1 failed" "$WORK/out.txt")" = 1 ] \
      || fail "rank $r did not report the failure of rank 1"
    [ "$(count_of 'exit status 1' "$WORK/logs/rank$r.log")" = 1 ] || fail "rank $r exit status"
  done
  [ "$(count_of 'exit status 1' "$WORK/logs/rank1.log")" = 1 ] || fail "rank 1 exit status"
fi
echo "rank failure ($MODE): every rank stopped non-zero in ${elapsed} s"
