#!/usr/bin/env bash
# Synthetic weights (issue 11): with `weights: synthetic` every rank generates its own
# layers in place, and the run writes the same --dump-logits as the run reading the
# written tiny checkpoint (dsv4-mkckpt --preset tiny --seed 1), plain at P = 1 and 2 and
# speculative (dspark) at P = 2; another seed gives other logits (the comparison can fail).
# usage: synthetic_weights.sh <dsv4-stage> <model dir> <configs dir> <work dir>
EXE=$1; MODEL=$2; CONFIGS=$3; WORK=$4
source "$(dirname "$0")/common.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
sed 's/^weights_seed: 1$/weights_seed: 2/' "$CONFIGS/tiny-synthetic.yaml" > "$WORK/seed2.yaml"
run() {  # run NAME P ARGS...
  local name=$1 p=$2; shift 2
  run_np "$p" --max-new 12 --dump-logits "$WORK/$name.json" "$@" > "$WORK/$name.out"
}
run file1 1 --config "$CONFIGS/tiny.yaml" --model "$MODEL"
run synth1 1 --config "$CONFIGS/tiny-synthetic.yaml"
run synth2 2 --config "$CONFIGS/tiny-synthetic.yaml"
run file2_dspark 2 --config "$CONFIGS/tiny.yaml" --model "$MODEL" --drafter dspark
run synth2_dspark 2 --config "$CONFIGS/tiny-synthetic.yaml" --drafter dspark
run seed2 1 --config "$WORK/seed2.yaml"
for name in synth1 synth2; do
  cmp "$WORK/file1.json" "$WORK/$name.json" || fail "$name: logits differ from the written checkpoint's"
done
cmp "$WORK/file2_dspark.json" "$WORK/synth2_dspark.json" || fail "dspark: synthetic logits differ from the checkpoint's"
if cmp -s "$WORK/file1.json" "$WORK/seed2.json"; then fail "weights_seed 2 gave the logits of seed 1"; fi
echo "synthetic weights: $(cat "$WORK/synth1.out") equal to the written checkpoint at P = 1, 2 and with dspark"
