#!/usr/bin/env bash
# --dump-boundary at P = 3, then --stage-only R --replay for every stage (the middle one
# is the point): each stage alone reproduces its dumped outputs exactly on the CPU backend.
# Plain greedy, then speculative runs (DSpark, and the replay drafter with rejections):
# propose / verify / commit replay too, with the taps crossing a boundary and the head
# stage's drafter (prime, proposals, ring writes). A replay whose settings differ from the
# dump's run_description.txt is refused by name, and so is a damaged dump.
# usage: replay_stage.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
replay_all() {  # replay_all DUMP MIN_COMPARES [flags...]: every stage matches its dump
  local dump=$1 min=$2; shift 2
  for r in 1 0 2; do
    "$EXE" --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --stage-only "$r" \
      --replay "$dump" "$@" > "$dump.replay$r.out" || fail "replay of stage $r of $dump: $(tail -1 "$dump.replay$r.out")"
    grep -q "all outputs match exactly" "$dump.replay$r.out" || fail "replay of stage $r of $dump did not compare"
    [ "$(count_of 'max |diff|' "$dump.replay$r.out")" -ge "$min" ] || fail "replay of stage $r of $dump compared too little"
  done
}
run_np 3 --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --max-new 4 \
  --dump-boundary "$WORK/dump" --dump-logits "$WORK/plain.json" > /dev/null
[ -f "$WORK/dump/rank1_op0_recv.safetensors" ] || fail "no boundary dump of rank 1"
[ -f "$WORK/dump/rank1_op0_send.safetensors" ] || fail "no boundary dump of rank 1's output"
[ -f "$WORK/dump/run_description.txt" ] || fail "no run description in the dump"
replay_all "$WORK/dump" 4
echo "replay: stages 0, 1, 2 match their plain dumps exactly"

# Layers 0-1 | 2-4 | 5-6: the tap of layer 4 crosses from rank 1 to rank 2.
i=0
for drafter in dspark "replay:$WORK/plain.json:corrupt=3"; do
  i=$((i + 1))
  run_np 3 --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --max-new 12 \
    --drafter "$drafter" --dump-boundary "$WORK/spec$i" > /dev/null
  replay_all "$WORK/spec$i" 12 --drafter "$drafter"
  for r in 0 1; do
    grep -q "taps: max |diff| = 0$" "$WORK/spec$i.replay$r.out" || fail "stage $r of spec$i compared no taps"
  done
  [ "$(count_of 'proposal ids: max |diff| = 0' "$WORK/spec$i.replay2.out")" -ge 2 ] ||
    fail "the head stage of spec$i replayed fewer than 2 proposals"
  [ "$(count_of 'proposal confidence: max |diff| = 0' "$WORK/spec$i.replay2.out")" -ge 2 ] ||
    fail "the head stage of spec$i compared fewer than 2 proposal confidences"
done
echo "replay: stages 0, 1, 2 of speculative dumps (dspark, replay drafter) match exactly"

# A chunked prefill (issue 13; chunks of 5 rows: operations 0..3, the head scores only the
# last) with the DSpark rings primed over the chunks; a replay with another chunk size is
# refused by name.
run_np 3 --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --max-new 6 --drafter dspark \
  --prefill-chunk 5 --dump-boundary "$WORK/chunked" > /dev/null
replay_all "$WORK/chunked" 8 --drafter dspark --prefill-chunk 5
grep -q "^op 1 h: max |diff| = 0$" "$WORK/chunked.replay2.out" || fail "the head stage compared no chunk rows"
"$EXE" --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --stage-only 1 --replay "$WORK/chunked" \
  --drafter dspark > "$WORK/chunked.refused" 2>&1 && fail "a replay with another prefill_chunk ran"
grep -q "prefill_chunk is 5, this replay's is 2048" "$WORK/chunked.refused" ||
  fail "the prefill_chunk refusal does not name the values: $(tail -1 "$WORK/chunked.refused")"
echo "replay: stages 0, 1, 2 of a chunked speculative dump match exactly"
# The proposals are compared for real: the replay drafter's dump, replayed as if it had
# been recorded with another rejection index, differs at its proposals.
# The run description of a corrupt=2 run (one token is enough) over spec2's files.
run_np 3 --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --max-new 1 \
  --drafter "replay:$WORK/plain.json:corrupt=2" --dump-boundary "$WORK/corrupt2" > /dev/null
cp -r "$WORK/spec2" "$WORK/tampered"
cp "$WORK/corrupt2/run_description.txt" "$WORK/tampered/"
if "$EXE" --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --stage-only 2 --replay "$WORK/tampered" \
    --drafter "replay:$WORK/plain.json:corrupt=2" > "$WORK/tampered.out" 2>&1; then
  fail "a replay with other proposals than the dump's matched"
fi
grep -q "proposal ids: max |diff| = [1-9]" "$WORK/tampered.out" || fail "no differing proposal reported"
grep -q "outputs differ" "$WORK/tampered.out" || fail "no 'outputs differ' verdict"

# Settings differing from the dump's are refused by name, before anything is compared.
refused() {  # refused KEY CONFIG [flags...]
  local key=$1 config=$2; shift 2
  if "$EXE" --config "$config" --model "$MODEL" --stage-only 2 --replay "$WORK/spec1" "$@" \
      > "$WORK/refused.out" 2> "$WORK/refused.err"; then
    fail "a replay with a different $key was accepted"
  fi
  grep -q "the dumped run's $key is .*, this replay's is" "$WORK/refused.err" ||
    fail "the refusal does not name $key: $(cat "$WORK/refused.err")"
  ! grep -q "max |diff|" "$WORK/refused.out" || fail "a refused replay compared outputs"
}
refused drafter "$CONFIGS/tiny-np3.yaml"
refused spec_depth "$CONFIGS/tiny-np3.yaml" --drafter dspark --spec-depth 2
{ cat "$CONFIGS/tiny-np3.yaml"; echo "numerics: {kv_quant: e4m3}"; } > "$WORK/e4m3.yaml"
refused numerics "$WORK/e4m3.yaml" --drafter dspark
echo "replay: different drafter, spec_depth and numerics are refused by name"

# A damaged dump is refused by name (issue 17 item 5), never replayed in part and never
# an internal invariant: a missing file, an edited position, no run description.
# refused_replay NAME EXPECTED DIR
refused_replay() {
  set +e; "$EXE" --config "$CONFIGS/tiny-np3.yaml" --model "$MODEL" --stage-only 1 --replay "$3" \
    > "$WORK/$1.out" 2>&1; local rc=$?; set -e
  [ "$rc" = 1 ] || { cat "$WORK/$1.out"; fail "$1: exit status $rc"; }
  grep -q -F -- "$2" "$WORK/$1.out" || { cat "$WORK/$1.out"; fail "$1: no '$2'"; }
  ! grep -q "internal invariant\|match exactly" "$WORK/$1.out" || fail "$1: replayed or aborted"
}
cp -r "$WORK/dump" "$WORK/gap"; rm "$WORK/gap/rank1_op2_recv.safetensors"
refused_replay gap "missing $WORK/gap/rank1_op2_recv.safetensors" "$WORK/gap"
cp -r "$WORK/dump" "$WORK/nosend"; rm "$WORK/nosend/rank1_op1_send.safetensors"
refused_replay nosend "missing $WORK/nosend/rank1_op1_send.safetensors" "$WORK/nosend"
cp -r "$WORK/dump" "$WORK/nodesc"; rm "$WORK/nodesc/run_description.txt"
refused_replay nodesc "run_description.txt (not a complete --dump-boundary folder)" "$WORK/nodesc"
# positions of operation 2 (a decode at 17) moved to 40: the byte is edited in place.
cp -r "$WORK/dump" "$WORK/pos"; f="$WORK/pos/rank1_op2_recv.safetensors"
header_len=$(od -An -tu8 -N8 "$f" | tr -d ' ')
begin=$(cmake -DSHARD="$f" -DHEADER_LEN="$header_len" -DTENSOR=positions -P "$(dirname "$0")/tensor_offset.cmake")
printf '\x28' | dd of="$f" bs=1 seek=$((8 + header_len + begin)) conv=notrunc 2>/dev/null
refused_replay pos "$f: tensor positions: entry 0 is 40, expected 17 (rows are consecutive from op_pos)" "$WORK/pos"
sed 's/^max_seq: .*/max_seq: 200/' "$CONFIGS/tiny-np3.yaml" > "$WORK/other.yaml"
set +e; "$EXE" --config "$WORK/other.yaml" --model "$MODEL" --stage-only 1 --replay "$WORK/dump" > "$WORK/other.out" 2>&1; set -e
grep -q "the dumped run's max_seq is 256, this replay's is 200" "$WORK/other.out" || { cat "$WORK/other.out"; fail "an incompatible run config was replayed"; }
echo "replay: 5 damaged dumps refused by name"
