#!/usr/bin/env bash
# --dump-boundary at P = 3, then --stage-only R --replay for every stage (the middle one
# is the point): each stage alone reproduces its dumped outputs exactly on the CPU backend.
# usage: replay_stage.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
run_np 3 --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --max-new 4 \
  --dump-boundary "$WORK/dump" > /dev/null
[ -f "$WORK/dump/rank1_op0_recv.safetensors" ] || fail "no boundary dump of rank 1"
[ -f "$WORK/dump/rank1_op0_send.safetensors" ] || fail "no boundary dump of rank 1's output"
for r in 1 0 2; do
  "$EXE" --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --stage-only "$r" \
    --replay "$WORK/dump" > "$WORK/replay$r.out" || fail "replay of stage $r: $(tail -1 "$WORK/replay$r.out")"
  grep -q "all outputs match exactly" "$WORK/replay$r.out" || fail "replay of stage $r did not compare"
  [ "$(count_of 'max |diff|' "$WORK/replay$r.out")" -ge 4 ] || fail "replay of stage $r compared too little"
done
echo "replay: stages 0, 1, 2 match their dumps exactly"
