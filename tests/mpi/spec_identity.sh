#!/usr/bin/env bash
# Law 3 (ARCHITECTURE.md; SPECDECODE.md R-I1) across ranks: speculative runs emit the plain
# greedy tokens and the same --dump-logits file, byte for byte, at P = 1 and 2, with the
# DSpark drafter at depth caps 1, 2 and the maximum, and with the replay drafter (always
# right, and corrupted at each draft index r = 1..B). Also checks --spec-stats is written,
# and --stop-ids (S6) in plain and speculative runs (mode fixed); mode auto: the same
# identity with --spec-depth auto (issue 15).
# usage: spec_identity.sh <fixed|auto> <dsv4-stage> <model dir> <configs dir> <work dir>
MODE=$1; EXE=$2; MODEL=$3; CONFIGS=$4; WORK=$5
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
B=5  # dspark_block_size of the tiny preset
run() {  # run NAME P PROMPT [flags...]
  local name=$1 p=$2 prompt=$3; shift 3
  run_np "$p" --config "$CONFIGS/tiny.yaml" --model "$MODEL" --max-new 17 \
    --prompt-ids "$prompt" --dump-logits "$WORK/$name.json" "$@" > "$WORK/$name.out"
}
same() {  # same NAME REFERENCE
  cmp "$WORK/$2.out" "$WORK/$1.out" || fail "tokens of $1 differ from $2"
  cmp "$WORK/$2.json" "$WORK/$1.json" || fail "logits of $1 differ from $2"
}
if [ "$MODE" = auto ]; then
  run plain1 1 7
  # spec_depth auto: each round's depth from the confidences (DSpark's own, and scripted
  # replay confidences that pick T = 6, 1, 3 under the built-in table, then under the
  # measured CPU table); the tokens and logits stay those of plain greedy.
  conf="2.2,2.2,2.2,2.2,2.2/-4.6,-4.6,-4.6,-4.6,-4.6/2.9,2.9,-3.5,0,0"
  for p in 1 2; do
    run "auto-dspark-np$p" "$p" 7 --drafter dspark --spec-depth auto --spec-stats "$WORK/auto$p.json"
    same "auto-dspark-np$p" plain1
    grep -q '"spec_depth": "auto"' "$WORK/auto$p.json" || fail "--spec-stats does not record spec_depth auto"
    run "auto-replay-np$p" "$p" 7 --drafter "replay:$WORK/plain1.json:corrupt=4:confidence=$conf" \
      --spec-depth auto --spec-stats "$WORK/auto-replay$p.json"
    same "auto-replay-np$p" plain1
    grep -q '"t_cap": 1,' "$WORK/auto-replay$p.json" || fail "no scheduled round of depth 1"
    grep -q '"t_cap": 6,' "$WORK/auto-replay$p.json" || fail "no scheduled round of depth 6"
    run "auto-costs-np$p" "$p" 7 --drafter "replay:$WORK/plain1.json:confidence=$conf" \
      --spec-depth auto --spec-costs "$(dirname "$0")/../../bench/costs/tiny-cpu-np1.json"
    same "auto-costs-np$p" plain1
  done
  echo "spec identity: --spec-depth auto (DSpark, scripted replay confidences) equals plain greedy, P = 1 and 2"
  exit 0
fi
[ "$MODE" = fixed ] || fail "mode '$MODE' is not fixed or auto"
i=0
for prompt in 7 17,4,99,250,3,42,7,311,8,64,128,5,77,19,2,401,9,33 5,6,5,6,5,6,5,6; do
  i=$((i + 1))
  run "plain$i" 1 "$prompt"
  for p in 1 2; do
    for depth in 1 2 $((B + 1)); do
      run "dspark$i-np$p-d$depth" "$p" "$prompt" --drafter dspark --spec-depth "$depth" \
        --spec-stats "$WORK/dspark$i-np$p-d$depth.stats.json"
      same "dspark$i-np$p-d$depth" "plain$i"
      grep -q '"round_records"' "$WORK/dspark$i-np$p-d$depth.stats.json" || fail "no stats"
    done
    run "replay$i-np$p" "$p" "$prompt" --drafter "replay:$WORK/plain$i.json"
    same "replay$i-np$p" "plain$i"
    for r in $(seq 1 $B); do
      run "replay$i-np$p-c$r" "$p" "$prompt" --drafter "replay:$WORK/plain$i.json:corrupt=$r"
      same "replay$i-np$p-c$r" "plain$i"
    done
  done
done
# S6: with a stop id (the 6th token of a plain run), plain greedy emits the stream up to
# its first occurrence and logs it; speculative runs emit the same tokens and logits.
stop=$(sed -n 's/^tokens: //p' "$WORK/plain1.out" | cut -d, -f6)
run stop-plain 1 7 --stop-ids "$stop" 2> "$WORK/stop-plain.err"
grep -q "stopped at stop id $stop after" "$WORK/stop-plain.err" || fail "no stop log line"
[ "$(sed -n 's/^tokens: //p' "$WORK/stop-plain.out" | tr , '\n' | tail -1)" = "$stop" ] ||
  fail "plain run with --stop-ids $stop does not end at the stop id"
for p in 1 2; do
  run "stop-dspark-np$p" "$p" 7 --drafter dspark --stop-ids "$stop" --spec-stats "$WORK/s$p.json"
  same "stop-dspark-np$p" stop-plain
  grep -q '"stopped": true' "$WORK/s$p.json" || fail "--spec-stats does not record the stop"
  run "stop-replay-np$p" "$p" 7 --drafter "replay:$WORK/plain1.json" --stop-ids "$stop"
  same "stop-replay-np$p" stop-plain
done
echo "spec identity: DSpark and replay runs equal plain greedy for $i prompts, P = 1 and 2"
