#!/usr/bin/env bash
# Start-up agreement (issue 17 item 2): an MPMD launch whose two ranks differ in one item
# (prompt, numerics, drafter, checkpoint) stops before any weight is read, with one line
# naming the differing item and both ranks; the same launch with equal ranks runs.
# usage: startup_agreement.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
base=(--config "$CONFIGS/tiny-np2.yaml" --model "$MODEL" --max-new 2)
# The numerics differ only through the YAML (no flag): a second config with one option changed.
sed 's/^max_new: .*/max_new: 2\nnumerics: {kv_quant: e4m3}/' "$CONFIGS/tiny-np2.yaml" > "$WORK/e4m3.yaml"
mxfp4=$(dirname "$MODEL")/tiny-mxfp4

# mpmd <case> <expected item> ARGS-OF-RANK-1...: rank 0 runs the base arguments.
mpmd() {
  local name=$1 item=$2; shift 2
  set +e
  timeout 60 "$MPIRUN" "${mpirun_flags[@]}" -np 1 "$EXE" "${base[@]}" : -np 1 "$EXE" "$@" \
    > "$WORK/$name.out" 2>&1
  local rc=$?
  set -e
  [ "$rc" != 124 ] || fail "$name: the job hung"
  [ "$rc" != 0 ] || fail "$name: the job exited 0"
  ! grep -q '^tokens:' "$WORK/$name.out" || fail "$name: tokens printed"
  [ "$(count_of "ranks disagree on $item: rank 0 has" "$WORK/$name.out")" = 1 ] \
    || { cat "$WORK/$name.out"; fail "$name: no one line naming $item and rank 0"; }
  grep -q "; rank 1 has" "$WORK/$name.out" || fail "$name: rank 1's value not named"
  ! grep -q "resident bytes" "$WORK/$name.out" || fail "$name: weights were loaded"
}
mpmd prompt prompt_ids "${base[@]}" --prompt-ids 1,2,3
mpmd numerics numerics --config "$WORK/e4m3.yaml" --model "$MODEL"
mpmd drafter drafter "${base[@]}" --drafter dspark
mpmd checkpoint "checkpoint weight map" "${base[@]}" --model "$mxfp4"
timeout 60 "$MPIRUN" "${mpirun_flags[@]}" -np 1 "$EXE" "${base[@]}" : -np 1 "$EXE" "${base[@]}" \
  > "$WORK/same.out" 2>&1 || { cat "$WORK/same.out"; fail "equal ranks did not run"; }
grep -q '^tokens:' "$WORK/same.out" || fail "equal ranks printed no tokens"
echo "startup agreement: 4 differing MPMD launches refused by item, the equal one runs"
