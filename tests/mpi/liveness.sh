#!/usr/bin/env bash
# Liveness (issue 17 item 3): rank 1 of 3 freezes (SIGSTOP, DSV4_FAULT_INJECT=1:2:stop)
# and never reports anything; with --liveness-timeout 3 its peers declare it failed and
# the job ends non-zero within the test's own bound (60 s), with a line naming rank 1,
# no tokens, and no process of the job left behind (the frozen one included).
# usage: liveness.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
start=$(date +%s)
set +e
DSV4_FAULT_INJECT=1:2:stop timeout -s KILL 60 "$MPIRUN" "${mpirun_flags[@]}" -x DSV4_FAULT_INJECT \
  -np 3 "$EXE" --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --max-new 32 \
  --liveness-timeout 3 --log-dir "$WORK/logs" > "$WORK/out.txt" 2>&1
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
cat "$WORK/out.txt"
frozen=$(sed -n 's/.*\] pid \([0-9]*\)$/\1/p' "$WORK/logs/rank1.log")
# alive PID: the process exists and is not a zombie.
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${st:0:1}" != Z ]; }
if [ -n "$frozen" ]; then
  for _ in $(seq 50); do alive "$frozen" || break; sleep 0.1; done  # mpirun's kill takes a moment
  if alive "$frozen"; then kill -KILL "$frozen"; fail "the frozen rank 1 (pid $frozen) was left behind"; fi
fi
[ "$rc" != 137 ] || fail "the job hung (killed after 60 s)"
[ "$rc" != 0 ] || fail "the job exited 0"
! grep -q '^tokens:' "$WORK/out.txt" || fail "tokens printed despite the frozen rank"
n=$(count_of "stopping because rank 1 stopped responding (no heartbeat for" "$WORK/out.txt")
[ "$n" -ge 1 ] && [ "$n" -le 2 ] || fail "expected one line per surviving rank naming rank 1, got $n"
[ "$elapsed" -lt 40 ] || fail "took ${elapsed} s for a 3 s timeout"
echo "liveness: the frozen rank 1 was declared failed; the job ended (exit $rc) in ${elapsed} s"
