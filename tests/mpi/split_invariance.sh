#!/usr/bin/env bash
# Law 1 (ARCHITECTURE.md): tokens and --dump-logits files of P = 1, 2, 3, 4 ranks are
# identical byte for byte; P = 2 also with the explicit split at layer 5 (CHECKPOINT.md §6.3).
# Chunked prefill (issue 13): a 41-token prompt (past W = 16 and index_topk 8 blocks) in
# chunks of 7 on 2 ranks (also with DSpark speculative decoding after it), 16 on 3 ranks
# and 1 on 1 rank gives the unchunked P = 1 run's tokens and logits byte for byte.
# usage: split_invariance.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
run() {  # run NAME P CONFIG [FLAGS...]
  run_np "$2" --config "$CONFIGS/$3" --model "$MODEL" --max-new 12 \
    --dump-logits "$WORK/$1.json" "${@:4}" > "$WORK/$1.out"
}
run np1 1 tiny.yaml
for p in 2 3 4; do run "np$p" "$p" tiny.yaml; done
run np2-split5 2 tiny-np2.yaml
grep -q '^tokens: ' "$WORK/np1.out" || fail "no tokens line at P = 1"
for name in np2 np3 np4 np2-split5; do
  cmp "$WORK/np1.out" "$WORK/$name.out" || fail "tokens of $name differ from P = 1"
  cmp "$WORK/np1.json" "$WORK/$name.json" || fail "logits of $name differ from P = 1"
done
echo "split invariance: $(cat "$WORK/np1.out") identical for P = 1..4"

long=$(seq -s, 3 11 443)  # 41 ids
run long-np1 1 tiny.yaml --prompt-ids "$long" --prefill-chunk 0
run long-np2-chunk7 2 tiny.yaml --prompt-ids "$long" --prefill-chunk 7
run long-np3-chunk16 3 tiny.yaml --prompt-ids "$long" --prefill-chunk 16
run long-np1-chunk1 1 tiny.yaml --prompt-ids "$long" --prefill-chunk 1
run long-np2-chunk7-dspark 2 tiny.yaml --prompt-ids "$long" --prefill-chunk 7 --drafter dspark
grep -q '^tokens: ' "$WORK/long-np1.out" || fail "no tokens line for the 41-token prompt"
for name in long-np2-chunk7 long-np3-chunk16 long-np1-chunk1 long-np2-chunk7-dspark; do
  cmp "$WORK/long-np1.out" "$WORK/$name.out" || fail "tokens of $name differ from unchunked P = 1"
  cmp "$WORK/long-np1.json" "$WORK/$name.json" || fail "logits of $name differ from unchunked P = 1"
done
echo "chunked prefill: $(cat "$WORK/long-np1.out") identical for chunks 7 (P = 2, plain and"\
  "speculative), 16 (P = 3), 1"
