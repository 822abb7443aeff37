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
#   --accept-lens "L" speculative rows too: for each X in L (e.g. "2.8 3.5 5.7", each in
#                     [1, 6]) the replay drafter replays the plain run's tokens with
#                     scripted rejections of mean acceptance length X tokens per round
#                     (--drafter replay:FILE:accept_len=X, verify depth 6), and the table
#                     adds ms per generated token and the speed-up over plain decode. The
#                     written checkpoint then carries the dspark_* keys without mtp.*
#                     tensors (dsv4-mkckpt --dspark-keys); a --model needs dspark_* keys.
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
#                 "log": str } ],                rank 0's log
#     "spec_runs": [ { "ranks": int, "accept_len": float,   the scripted X
#                      "tokens_per_round": float,           measured mean emitted per round
#                      "ms_per_token": float,               decode ms / (max_new - 1)
#                      "speedup": float,                    plain ms/step / ms_per_token
#                      "log": str } ]                       (empty without --accept-lens)
#   }
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_dirs "bench/flash_decode.sh BUILD_DIR OUT_DIR [--layers N] [--experts R] [--backend B] [--model DIR] [--np LIST] [--max-new M] [--prompt-len P] [--keep] [--stage-args \"A\"]" "$@"
shift 2

layers=4 experts=nvfp4 backend=cuda model="" nps="" max_new=32 prompt_len=16 keep=0 stage_args=""
accept_lens=""
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
    --accept-lens) accept_lens=${2:?--accept-lens needs a value}; shift 2 ;;
    *) die "unknown option '$1' (see the usage at the top of the script)" ;;
  esac
done
case $backend in cuda) transport=nccl ;; cpu) transport=mpi ;; *) die "--backend: '$backend' is not cuda or cpu" ;; esac
[[ $max_new =~ ^[0-9]+$ && $max_new -ge 2 ]] || die "--max-new: '$max_new' must be an integer >= 2 (one decode step at least)"
[[ $prompt_len =~ ^[0-9]+$ && $prompt_len -ge 1 && $prompt_len -le 16 ]] || die "--prompt-len: '$prompt_len' must lie in 1..16"
for x in $accept_lens; do
  [[ $x =~ ^[1-6](\.[0-9]{1,3})?$ ]] && awk -v x="$x" 'BEGIN { exit !(x <= 6) }' ||
    die "--accept-lens: '$x' is not a length in [1, 6] with at most 3 decimals"
done

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
  "$mkckpt" --preset flash --trunk-layers "$layers" --experts "$experts" ${accept_lens:+--dspark-keys} \
    --force --out "$model" >&2
else
  model=$(cd "$model" && pwd) || die "--model $model not found"
fi
if [ -n "$accept_lens" ] && ! grep -q '"dspark_block_size"' "$model/config.json"; then
  die "--accept-lens: $model/config.json has no dspark_* keys (the replay drafter needs the block size)"
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

# run_in DIR NP [flags...]: dsv4-stage on NP ranks; stdout, stderr and logs in DIR.
run_in() {
  local dir=$1 np=$2; shift 2
  rm -rf "$dir" && mkdir -p "$dir"
  bench_run_yaml "$dir/run.yaml"
  echo "flash_decode.sh: -np $np, backend $backend, transport $transport $*, logs in $dir" >&2
  "$repo/scripts/mpirun.sh" -np "$np" "$stage" --config "$dir/run.yaml" --prompt-ids "$prompt" \
    --max-new "$max_new" --log-dir "$dir/logs" $stage_args "$@" >"$dir/stdout.txt" 2>"$dir/stderr.txt" ||
    die "dsv4-stage -np $np $* failed (exit $?); see $dir/stderr.txt and $dir/logs"
}

rows="" runs_json="" spec_rows="" spec_json=""
for np in $nps; do
  dir=$out/np$np
  run_in "$dir" "$np"
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

  # Speculative rows: the plain run's stream, replayed with scripted rejections.
  [ -n "$accept_lens" ] || continue
  tokens=$(sed -n 's/^tokens: //p' "$dir/stdout.txt")
  [ -n "$tokens" ] || die "no 'tokens:' line in $dir/stdout.txt"
  echo "{\"prompt\": [$prompt], \"tokens\": [$tokens]}" >"$dir/recorded.json"
  for x in $accept_lens; do
    sdir=$dir/accept$x
    run_in "$sdir" "$np" --drafter "replay:$dir/recorded.json:accept_len=$x"
    slog=$sdir/logs/rank0.log
    cmp -s <(sed -n 's/^tokens: //p' "$sdir/stdout.txt") <(echo "$tokens") ||
      die "the speculative tokens of $sdir differ from the plain run's (law 3)"
    # rank 0: "..., T tokens per round, ... ms/token over N tokens"
    read -r tpr ms < <(grep -o '[0-9.]* tokens per round, .* [0-9.]* ms/token' "$slog" | tail -n 1 |
      sed 's/^\([0-9.]*\) tokens per round.* \([0-9.]*\) ms\/token$/\1 \2/') ||
      die "no speculative summary line in $slog"
    speedup=$(awk -v p="$decode_ms" -v s="$ms" 'BEGIN { printf "%.2f", p / s }')
    spec_rows+=$(printf '%5s %-9s %10s %14s %12s %14s %8s' "$np" "$used_transport" "$x" "$tpr" "$ms" \
      "$decode_ms" "$speedup")$'\n'
    spec_json+="${spec_json:+,
}    {\"ranks\": $np, \"accept_len\": $x, \"tokens_per_round\": $tpr, \"ms_per_token\": $ms, \"speedup\": $speedup, \"log\": \"$slog\"}"
  done
done

printf '%6s %5s %-9s %14s %7s %16s %12s %12s %10s %10s\n' layers ranks transport "decode_ms/step" steps \
  step_bytes floor_ms@4.3 floor_ms@4.8 x_floor4.3 x_floor4.8
printf '%s' "$rows"
if [ -n "$spec_rows" ]; then
  printf '\n%5s %-9s %10s %14s %12s %14s %8s\n' ranks transport accept_len tokens/round ms/token \
    plain_ms/token speedup
  printf '%s' "$spec_rows"
fi

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
  ],
  "spec_runs": [
$spec_json
  ]
}
EOF
echo "flash_decode.sh: wrote $out/flash_decode.json" >&2
