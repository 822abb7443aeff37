#!/usr/bin/env bash
# Text runs across ranks (issue 14): a sampled text run (temperature, top-k, top-p, min-p,
# seed) prints the same text and tokens at P = 1, 2 and 3, a chat run too; another seed
# draws other tokens; with a drafter (DSpark at P = 1 and 2, the replay drafter with
# rejections) the same seed gives the same tokens (lossless speculative sampling,
# point-mass form, stage/spec_sampling.h).
# usage: sampling_split.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
run() {  # run NAME P [flags...]: stdout (the text) to NAME.out, the log to NAME.err
  local name=$1 p=$2; shift 2
  run_np "$p" --config "$CONFIGS/tiny.yaml" --model "$MODEL" --max-new 20 --ignore-eos "$@" \
    > "$WORK/$name.out" 2> "$WORK/$name.err"
}
ids() { sed -n 's/.*tokens generated (finish [a-z]*): //p' "$WORK/$1.err"; }
sampling=(--prompt "The engine" --temperature 0.8 --top-k 40 --top-p 0.9 --min-p 0.02)
for p in 1 2 3; do
  run "seed5-np$p" "$p" "${sampling[@]}" --seed 5
  run "chat-np$p" "$p" --prompt "hi" --chat --system "Be brief." --temperature 1.2 --seed 9
done
[ -n "$(ids seed5-np1)" ] || fail "no token log line in seed5-np1.err"
for p in 2 3; do
  cmp "$WORK/seed5-np1.out" "$WORK/seed5-np$p.out" || fail "sampled text at P = $p differs from P = 1"
  [ "$(ids seed5-np1)" = "$(ids seed5-np$p)" ] || fail "sampled tokens at P = $p differ from P = 1"
  [ "$(ids chat-np1)" = "$(ids chat-np$p)" ] || fail "chat tokens at P = $p differ from P = 1"
done
run seed6 2 "${sampling[@]}" --seed 6
[ "$(ids seed5-np1)" != "$(ids seed6)" ] || fail "seeds 5 and 6 drew the same 20 tokens"
# Token-id runs: plain sampling, then drafters (DSpark mostly rejected on random weights;
# the replay of the sampled run itself with forced rejections) at P = 1 and 2.
knobs=(--temperature 0.8 --top-k 40 --top-p 0.9 --min-p 0.02 --seed 5)
idrun() {  # idrun NAME P [flags...]: stdout (the tokens line) to NAME.out, the log to NAME.err
  local name=$1 p=$2; shift 2
  run_np "$p" --config "$CONFIGS/tiny.yaml" --model "$MODEL" --prompt-ids 1,2,3 --max-new 20 \
    "${knobs[@]}" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
}
idrun plain 1 --dump-logits "$WORK/plain.json"
i=0
for spec in "dspark 1" "dspark 2" "replay:$WORK/plain.json:corrupt=2,5 2"; do
  set -- $spec
  i=$((i + 1))
  idrun "spec$i" "$2" --drafter "$1" --spec-depth 3
  grep -q "speculative ($1" "$WORK/spec$i.err" || fail "drafter $1 at P = $2 ran no speculative rounds"
  cmp "$WORK/plain.out" "$WORK/spec$i.out" ||
    fail "sampled tokens with drafter $1 at P = $2 differ from plain sampling: $(cat "$WORK/spec$i.out")"
done
echo "sampling: the same seed gives the same text at P = 1, 2, 3, and with a drafter"
