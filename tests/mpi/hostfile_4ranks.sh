#!/usr/bin/env bash
# A 4-rank run placed by a hostfile (`localhost slots=4`) produces the single-rank tokens.
# usage: hostfile_4ranks.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
run_np 1 --config "$CONFIGS/tiny.yaml" --model "$MODEL" > "$WORK/np1.out"
"$MPIRUN" "${mpirun_flags[@]}" --hostfile "$CONFIGS/hosts-localhost" -np 4 "$EXE" \
  --config "$CONFIGS/tiny-np4.yaml" --model "$MODEL" --log-dir "$WORK/logs" > "$WORK/np4.out"
cmp "$WORK/np1.out" "$WORK/np4.out" || fail "hostfile run tokens differ from P = 1"
for r in 0 1 2 3; do
  [ "$(count_of 'exit status 0' "$WORK/logs/rank$r.log")" = 1 ] || fail "rank $r did not finish"
done
echo "hostfile 4 ranks: $(cat "$WORK/np4.out")"
