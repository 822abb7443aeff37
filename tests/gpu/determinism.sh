#!/usr/bin/env bash
# GPU determinism (issue 10): two fresh processes running the same tiny-model generation
# on the CUDA backend write byte-identical --dump-logits, for plain greedy decode, the
# DSpark drafter and the replay drafter (every kernel has one fixed reduction order, and
# every buffer is written on the compute stream before it is read), and a run with
# --no-cuda-pdl writes the plain run's bytes (Programmatic Dependent Launch changes no bit).
# usage: determinism.sh DSV4_STAGE TINY_CKPT CONFIGS_DIR WORK_DIR
set -euo pipefail
exe=$1 ckpt=$2 configs=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

generate() {  # name args...: one fresh process
  local name=$1; shift
  "$exe" --config "$configs/tiny-cuda.yaml" --model "$ckpt" --max-new 48 \
    --dump-logits "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err" \
    || { cat "$work/$name.err" >&2; fail "$name exited non-zero"; }
}

generate plain_a
generate plain_b
cmp "$work/plain_a.json" "$work/plain_b.json" || fail "plain greedy: two processes' logits differ"
generate plain_no_pdl --no-cuda-pdl
cmp "$work/plain_a.json" "$work/plain_no_pdl.json" || fail "plain greedy: --no-cuda-pdl changes the logits"
generate dspark_a --drafter dspark
generate dspark_b --drafter dspark
cmp "$work/dspark_a.json" "$work/dspark_b.json" || fail "dspark: two processes' logits differ"
generate replay_a --drafter "replay:$work/plain_a.json"
generate replay_b --drafter "replay:$work/plain_a.json"
cmp "$work/replay_a.json" "$work/replay_b.json" || fail "replay drafter: two processes' logits differ"
# Law 3 on the way: the speculative tokens are the plain greedy tokens.
for n in dspark_a replay_a; do
  [ "$(grep tokens: "$work/$n.out")" = "$(grep tokens: "$work/plain_a.out")" ] \
    || fail "$n: tokens differ from plain greedy"
done
echo "determinism: plain (with and without PDL), dspark and replay runs byte-identical across fresh processes"
