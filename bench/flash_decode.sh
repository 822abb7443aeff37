#!/usr/bin/env bash
# Batch-1 decode benchmark at DeepSeek-V4-Flash dimensions against the physical floor
# (CHECKPOINT.md §5.3, §5.4; decision C11: quote 4.3 TB/s, print 4.3 and 4.8).
#
# usage: bench/flash_decode.sh BUILD_DIR OUT_DIR [options]
#   --layers N        trunk layers of the truncated Flash checkpoint (default 4; 1..43)
#   --experts R       trunk expert recipe nvfp4 | mxfp4 (default nvfp4)
#   --backend B       cuda | cpu (default cuda; cpu is a dry run of the parsing)
#   --model DIR       use this checkpoint instead of writing a truncated Flash one
#   --np "LIST"       rank counts to run (default "1", plus "2" for cuda with >= 2 GPUs)
#   --max-new M       tokens to generate (default 32; M - 1 decode steps are timed)
#   --prompt-len P    prompt length, 1..16 ids (default 16)
#   --keep            keep the written checkpoint (default: deleted at exit)
#   --stage-args "A"  extra dsv4-stage flags for every run, word-split (e.g. "--profile-ops";
#                     the op table lands in each rank's log, OUT_DIR/np<P>/logs/)
#
# Writes the checkpoint to a temp dir OUT_DIR/ckpt.XXXXXX, runs dsv4-stage once per rank
# count (transport nccl for cuda, mpi for cpu; logs in OUT_DIR/np<P>/), prints a table
# and writes OUT_DIR/flash_decode.json:
#   {
#     "model": str,               checkpoint directory the runs read
#     "backend": "cuda"|"cpu",
#     "experts": "nvfp4"|"mxfp4",
#     "trunk_layers": int,        num_hidden_layers of the checkpoint
#     "prompt_len": int, "max_new": int,
#     "step_bytes": int,          bytes one decode step reads (§5.3, dsv4-step-bytes)
#     "floor_ms_at_4_3": float,   step_bytes / 4.3 TB/s, in ms (the quoted floor, C11)
#     "floor_ms_at_4_8": float,   step_bytes / 4.8 TB/s (datasheet)
#     "runs": [ { "ranks": int, "transport": "none"|"nccl"|"mpi",   none at one rank
#                 "decode_ms_per_step": float,   rank 0's "decode X ms/token"
#                 "decode_steps": int, "prefill_ms": float,
#                 "ratio_at_4_3": float,         decode_ms_per_step / floor_ms_at_4_3
#                 "ratio_at_4_8": float,
#                 "log": str } ]                 rank 0's log
#   }
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_dirs "bench/flash_decode.sh BUILD_DIR OUT_DIR [--layers N] [--experts R] [--backend B] [--model DIR] [--np LIST] [--max-new M] [--prompt-len P] [--keep] [--stage-args \"A\"]" "$@"
shift 2

layers=4 experts=nvfp4 backend=cuda model="" nps="" max_new=32 prompt_len=16 keep=0 stage_args=""
while [ $# -gt 0 ]; do
  case $1 in
    --layers) layers=${2:?--layers needs a value}; shift 2 ;;
    --experts) experts=${2:?--experts needs a value}; shift 2 ;;
    --backend) backend=${2:?--backend needs a value}; shift 2 ;;
    --model) model=${2:?--model needs a value}; shift 2 ;;
    --np) nps=${2:?--np needs a value}; shift 2 ;;
    --max-new) max_new=${2:?--max-new needs a value}; shift 2 ;;
    --prompt-len) prompt_len=${2:?--prompt-len needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --stage-args) stage_args=${2?--stage-args needs a value}; shift 2 ;;
    *) die "unknown option '$1' (see the usage at the top of the script)" ;;
  esac
done
case $backend in cuda) transport=nccl ;; cpu) transport=mpi ;; *) die "--backend: '$backend' is not cuda or cpu" ;; esac
[[ $max_new =~ ^[0-9]+$ && $max_new -ge 2 ]] || die "--max-new: '$max_new' must be an integer >= 2 (one decode step at least)"
[[ $prompt_len =~ ^[0-9]+$ && $prompt_len -ge 1 && $prompt_len -le 16 ]] || die "--prompt-len: '$prompt_len' must lie in 1..16"

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkckpt=$build/launcher/dsv4-mkckpt
stage=$build/launcher/dsv4-stage
step_bytes_tool=$build/bench/dsv4-step-bytes
for t in "$mkckpt" "$stage" "$step_bytes_tool"; do
  [ -x "$t" ] || die "$t not built (cmake --build $build --target dsv4-mkckpt dsv4-stage dsv4-step-bytes)"
done

if [ -z "$nps" ]; then
  nps=1
  if [ "$backend" = cuda ]; then
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
      gpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
    else
      gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    fi
    [ "${gpus:-0}" -ge 2 ] && nps="1 2"
  fi
fi

if [ -z "$model" ]; then
  model=$(mktemp -d "$out/ckpt.XXXXXX")
  [ "$keep" = 1 ] || trap 'rm -rf "$model"' EXIT
  echo "flash_decode.sh: writing Flash trunk layers 0..$((layers - 1)) ($experts experts) to $model" >&2
  "$mkckpt" --preset flash --trunk-layers "$layers" --experts "$experts" --force --out "$model" >&2
else
  model=$(cd "$model" && pwd) || die "--model $model not found"
fi

# §5.3 bytes of one step for this checkpoint (its layers, its recipe, the head).
step_report=$("$step_bytes_tool" --model "$model")
echo "$step_report" >&2
step_bytes=$(sed -n 's/^step_bytes \([0-9]*\)$/\1/p' <<<"$step_report")
[ -n "$step_bytes" ] || die "dsv4-step-bytes printed no 'step_bytes' line"
trunk_layers=$(sed -n 's/.*, \([0-9]*\) trunk layers, \([a-z0-9]*\) experts.*/\1/p' <<<"$step_report")
experts=$(sed -n 's/.*, \([0-9]*\) trunk layers, \([a-z0-9]*\) experts.*/\2/p' <<<"$step_report")

bench_prompt  # prompt, max_seq (common.sh)

floor_43=$(awk -v b="$step_bytes" 'BEGIN { printf "%.4f", b / 4.3e9 }')  # ms at 4.3 TB/s
floor_48=$(awk -v b="$step_bytes" 'BEGIN { printf "%.4f", b / 4.8e9 }')  # ms at 4.8 TB/s

rows="" runs_json=""
for np in $nps; do
  dir=$out/np$np
  rm -rf "$dir" && mkdir -p "$dir"
  bench_run_yaml "$dir/run.yaml"
  echo "flash_decode.sh: -np $np, backend $backend, transport $transport, logs in $dir" >&2
  "$repo/scripts/mpirun.sh" -np "$np" "$stage" --config "$dir/run.yaml" --prompt-ids "$prompt" \
    --max-new "$max_new" --log-dir "$dir/logs" $stage_args >"$dir/stdout.txt" 2>"$dir/stderr.txt" ||
    die "dsv4-stage -np $np failed (exit $?); see $dir/stderr.txt and $dir/logs"
  log=$dir/logs/rank0.log
  used_transport=$transport
  [ "$np" -gt 1 ] || used_transport=none  # one stage: no data plane
  # rank 0: "prefill P ms (T tokens), decode X ms/token over S steps, R tokens/s"
  line=$(grep -o 'prefill [0-9.]* ms ([0-9]* tokens), decode [0-9.]* ms/token over [0-9]* steps' "$log" | tail -n 1) ||
    die "no 'decode ... ms/token' line in $log"
  read -r prefill_ms decode_ms steps < <(sed 's/prefill \([0-9.]*\) ms.*decode \([0-9.]*\) ms\/token over \([0-9]*\) steps/\1 \2 \3/' <<<"$line")
  ratio_43=$(awk -v m="$decode_ms" -v f="$floor_43" 'BEGIN { printf "%.2f", m / f }')
  ratio_48=$(awk -v m="$decode_ms" -v f="$floor_48" 'BEGIN { printf "%.2f", m / f }')
  rows+=$(printf '%6s %5s %-9s %14s %7s %16s %12s %12s %10s %10s' "$trunk_layers" "$np" "$used_transport" \
    "$decode_ms" "$steps" "$step_bytes" "$floor_43" "$floor_48" "$ratio_43" "$ratio_48")$'\n'
  runs_json+="${runs_json:+,
}    {\"ranks\": $np, \"transport\": \"$used_transport\", \"decode_ms_per_step\": $decode_ms, \"decode_steps\": $steps, \"prefill_ms\": $prefill_ms, \"ratio_at_4_3\": $ratio_43, \"ratio_at_4_8\": $ratio_48, \"log\": \"$log\"}"
done

printf '%6s %5s %-9s %14s %7s %16s %12s %12s %10s %10s\n' layers ranks transport "decode_ms/step" steps \
  step_bytes floor_ms@4.3 floor_ms@4.8 x_floor4.3 x_floor4.8
printf '%s' "$rows"

cat >"$out/flash_decode.json" <<EOF
{
  "model": "$model",
  "backend": "$backend",
  "experts": "$experts",
  "trunk_layers": $trunk_layers,
  "prompt_len": $prompt_len,
  "max_new": $max_new,
  "step_bytes": $step_bytes,
  "floor_ms_at_4_3": $floor_43,
  "floor_ms_at_4_8": $floor_48,
  "runs": [
$runs_json
  ]
}
EOF
echo "flash_decode.sh: wrote $out/flash_decode.json" >&2
