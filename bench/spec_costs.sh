#!/usr/bin/env bash
# Measures the per-T cost of a speculative round for `--spec-depth auto`
# (stage/depth_schedule.h): one plain greedy run records a token stream, then one run per
# verify depth T = 1..tmax (tmax = dspark_block_size + 1) replays it with the always-right
# replay drafter at --spec-depth T, and rank 0's per-operation timings (its log, debug
# level) give the mean ms of a propose, of a verify of T rows and of a commit.
#
# usage: bench/spec_costs.sh BUILD_DIR OUT_DIR --model DIR [options]
#   --model DIR       checkpoint with dspark_* keys in config.json (required)
#   --backend B       cpu | cuda (default cuda)
#   --np P            ranks (default 1)
#   --max-new M       tokens per run (default 64)
#   --prompt-len P    prompt length, 1..16 ids (default 16)
#   --stage-args "A"  extra dsv4-stage flags for every run, word-split
#
# Writes OUT_DIR/spec_costs.json, the file `spec_costs:` / `--spec-costs` reads:
#   {
#     "format": "dsv4-verify-costs/1",
#     "propose_ms": float,      mean rank-0 time of a propose operation
#     "commit_ms": float,       mean rank-0 time of a commit operation
#     "verify_ms": [float],     entry T-1: mean rank-0 time of a verify of T rows, T = 1..tmax
#     "verify_rounds": [int],   entry T-1: verify operations of T rows that were timed
#     "model": str, "backend": str, "ranks": int, "max_new": int
#   }
# The first verify of each run is not timed (warm-up: first touches of the verify arena).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_dirs "bench/spec_costs.sh BUILD_DIR OUT_DIR --model DIR [--backend B] [--np P] [--max-new M] [--prompt-len P] [--stage-args \"A\"]" "$@"
shift 2

model="" backend=cuda np=1 max_new=64 prompt_len=16 stage_args=""
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=${2:?--model needs a value}; shift 2 ;;
    --backend) backend=${2:?--backend needs a value}; shift 2 ;;
    --np) np=${2:?--np needs a value}; shift 2 ;;
    --max-new) max_new=${2:?--max-new needs a value}; shift 2 ;;
    --prompt-len) prompt_len=${2:?--prompt-len needs a value}; shift 2 ;;
    --stage-args) stage_args=${2?--stage-args needs a value}; shift 2 ;;
    *) die "unknown option '$1' (see the usage at the top of the script)" ;;
  esac
done
[ -n "$model" ] || die "--model: missing (a checkpoint with dspark_* keys)"
model=$(cd "$model" && pwd) || die "--model $model not found"
case $backend in cuda) transport=nccl ;; cpu) transport=mpi ;; *) die "--backend: '$backend' is not cuda or cpu" ;; esac
[[ $np =~ ^[1-9][0-9]*$ ]] || die "--np: '$np' is not a rank count"
[[ $max_new =~ ^[0-9]+$ && $max_new -ge 8 ]] || die "--max-new: '$max_new' must be an integer >= 8"
[[ $prompt_len =~ ^[0-9]+$ && $prompt_len -ge 1 && $prompt_len -le 16 ]] || die "--prompt-len: '$prompt_len' must lie in 1..16"
block=$(sed -n 's/^ *"dspark_block_size": *\([0-9]*\),*$/\1/p' "$model/config.json")
[ -n "$block" ] || die "$model/config.json has no dspark_block_size (the replay drafter needs the block size)"
tmax=$((block + 1))

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
stage=$build/launcher/dsv4-stage
[ -x "$stage" ] || die "$stage not built (cmake --build $build --target dsv4-stage)"
bench_prompt
bench_run_yaml "$out/run.yaml"

run() {  # run NAME [flags...]: dsv4-stage on np ranks, logs in OUT/NAME/logs
  local name=$1; shift
  rm -rf "${out:?}/$name" && mkdir -p "$out/$name"
  "$repo/scripts/mpirun.sh" -np "$np" "$stage" --config "$out/run.yaml" --prompt-ids "$prompt" \
    --max-new "$max_new" --log-dir "$out/$name/logs" $stage_args "$@" >"$out/$name/stdout.txt" \
    2>"$out/$name/stderr.txt" || die "dsv4-stage ($name) failed; see $out/$name/stderr.txt"
}

run plain
tokens=$(sed -n 's/^tokens: //p' "$out/plain/stdout.txt")
[ -n "$tokens" ] || die "no 'tokens:' line from the plain run ($out/plain/stdout.txt)"
echo "{\"prompt\": [$prompt], \"tokens\": [$tokens]}" >"$out/recorded.json"

verify_ms="" verify_rounds="" logs=()
for T in $(seq 1 "$tmax"); do
  echo "spec_costs.sh: depth $T of $tmax" >&2
  run "depth$T" --drafter "replay:$out/recorded.json" --spec-depth "$T"
  logs+=("$out/depth$T/logs/rank0.log")
done
# rank 0: "op N <kind> pos P T t: X ms"; every depth run adds verify ops of T = depth (and
# shorter budget-truncated ones), so all runs are pooled per T.
read -r propose commit < <(cat "${logs[@]}" | grep -o 'op [0-9]* [a-z]* pos [0-9]* T [0-9]*: [0-9.]* ms' |
  awk '$3 == "propose" { p += $8; np++ } $3 == "commit" { c += $8; nc++ }
       END { if (!np || !nc) exit 1; printf "%.6f %.6f\n", p / np, c / nc }') ||
  die "no propose / commit timings in the rank-0 logs (${logs[*]})"
for T in $(seq 1 "$tmax"); do
  read -r ms n < <(for log in "${logs[@]}"; do
      grep -o 'op [0-9]* verify pos [0-9]* T [0-9]*: [0-9.]* ms' "$log" | tail -n +2; done |
    awk -v t="$T" '$7 == t ":" { s += $8; n++ } END { if (!n) exit 1; printf "%.6f %d\n", s / n, n }') ||
    die "no verify of $T rows was timed"
  verify_ms+="${verify_ms:+, }$ms" verify_rounds+="${verify_rounds:+, }$n"
done

cat >"$out/spec_costs.json.tmp" <<EOF
{
  "format": "dsv4-verify-costs/1",
  "propose_ms": $propose,
  "commit_ms": $commit,
  "verify_ms": [$verify_ms],
  "verify_rounds": [$verify_rounds],
  "model": "$model",
  "backend": "$backend",
  "ranks": $np,
  "max_new": $max_new
}
EOF
mv "$out/spec_costs.json.tmp" "$out/spec_costs.json"
printf '%-8s %s\n' propose_ms "$propose" commit_ms "$commit" verify_ms "[$verify_ms]" rounds "[$verify_rounds]"
echo "spec_costs.sh: wrote $out/spec_costs.json" >&2
