#!/usr/bin/env bash
# Output files (issue 17 item 4): every output path is checked at start-up (before any
# weight is read), outputs are written to a temporary name and renamed when complete (a
# failed run leaves no partial and no stale file), and a log that cannot be written fails
# the run. A full disk is a small tmpfs when this machine lets us mount one.
# usage: outputs.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
base=(--config "$CONFIGS/tiny.yaml" --model "$MODEL" --max-new 4)

# refused NAME EXPECTED ARGS...: the run fails before loading, naming EXPECTED once.
refused() {
  local name=$1 expected=$2; shift 2
  set +e; timeout 60 "$EXE" "${base[@]}" "$@" > "$WORK/$name.out" 2>&1; local rc=$?; set -e
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$WORK/$name.out"; fail "$name: exit status $rc"; }
  [ "$(count_of "$expected" "$WORK/$name.out")" = 1 ] || { cat "$WORK/$name.out"; fail "$name: no line '$expected'"; }
  ! grep -q 'resident bytes' "$WORK/$name.out" || fail "$name: weights were loaded first"
}
touch "$WORK/a-file"
refused device "--dump-logits /dev/full: exists and is not a regular file" --dump-logits /dev/full
refused no-folder "--dump-logits $WORK/missing/l.json: the folder $WORK/missing does not exist" \
  --dump-logits "$WORK/missing/l.json"
refused stats-under-file "--spec-stats $WORK/a-file/s.json: the folder" --spec-stats "$WORK/a-file/s.json"
refused dump-is-file "dump_boundary $WORK/a-file: not a folder" --dump-boundary "$WORK/a-file"
refused log-is-file "log_dir $WORK/a-file: not a folder" --log-dir "$WORK/a-file"

# A log that cannot be written (its file is /dev/full) fails the run, naming the file.
mkdir -p "$WORK/full-log"; ln -s /dev/full "$WORK/full-log/rank0.log"
set +e; "$EXE" "${base[@]}" --log-dir "$WORK/full-log" > "$WORK/full-log.out" 2>&1; rc=$?; set -e
[ "$rc" != 0 ] || fail "a log on /dev/full: exit status 0"
grep -q "log_dir: cannot write $WORK/full-log/rank0.log" "$WORK/full-log.out" || fail "the log failure is not named"

# A previous run's file is removed at start-up: a failing run leaves none.
echo stale > "$WORK/stale.json"
set +e; DSV4_FAULT_INJECT=0:2:error "$EXE" "${base[@]}" --dump-logits "$WORK/stale.json" > /dev/null 2>&1; set -e
[ ! -e "$WORK/stale.json" ] || fail "a failed run left the previous --dump-logits file"
"$EXE" "${base[@]}" --dump-logits "$WORK/good.json" > /dev/null 2>&1 || fail "a good run failed"
grep -q '"logits"' "$WORK/good.json" || fail "no --dump-logits file from a good run"
! ls "$WORK"/*.partial-* 2>/dev/null || fail "a partial file was left"

# A full disk: a 64 KiB tmpfs takes the probe, not the 32-token logits dump (~220 KB); a
# 8 KiB one fills with the debug log.
mkdir -p "$WORK/full"
if mount -t tmpfs -o size=64k tmpfs "$WORK/full" 2>/dev/null; then
  trap 'umount "$WORK/full" 2>/dev/null || true' EXIT
  set +e; "$EXE" "${base[@]}" --max-new 32 --dump-logits "$WORK/full/l.json" > "$WORK/disk.out" 2>&1; rc=$?; set -e
  [ "$rc" != 0 ] || fail "--dump-logits on a full disk: exit status 0"
  grep -q -- "--dump-logits $WORK/full/l.json: write failed" "$WORK/disk.out" || { cat "$WORK/disk.out"; fail "the full disk is not named"; }
  [ -z "$(ls -A "$WORK/full")" ] || fail "a full disk kept a partial file: $(ls "$WORK/full")"
  umount "$WORK/full"; mount -t tmpfs -o size=8k tmpfs "$WORK/full"
  set +e; "$EXE" "${base[@]}" --max-new 240 --log-dir "$WORK/full" > "$WORK/disk-log.out" 2>&1; rc=$?; set -e
  [ "$rc" != 0 ] || fail "--log-dir on a full disk: exit status 0"
  grep -q "log_dir: cannot write $WORK/full/rank0.log" "$WORK/disk-log.out" || { cat "$WORK/disk-log.out"; fail "the full log disk is not named"; }
  umount "$WORK/full"; trap - EXIT
  echo "outputs: full-disk cases ran on a tmpfs"
else
  echo "outputs: mount not permitted here; the full-disk cases were skipped (/dev/full covers the log)"
fi
echo "outputs: bad paths refused at start-up, no stale or partial files, an unwritable log fails the run"
