#!/usr/bin/env bash
# Text runs across ranks (issue 14): a sampled text run (temperature, top-k, top-p, min-p,
# seed) prints the same text and tokens at P = 1, 2 and 3, a chat run too; another seed
# draws other tokens; sampling together with a drafter is refused by name (SPECDECODE S8).
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
if run spec 1 "${sampling[@]}" --seed 5 --drafter dspark; then fail "sampling with a drafter ran"; fi
grep -q "speculative decoding is greedy only" "$WORK/spec.err" || fail "no S8 refusal message"
echo "sampling: the same seed gives the same text at P = 1, 2, 3; drafter + sampling refused"
