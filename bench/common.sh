# Shared by the benchmark scripts (sourced after `set -euo pipefail`).
# die MESSAGE: the script's name and MESSAGE on stderr, exit 2.
die() { echo "$(basename "$0"): $*" >&2; exit 2; }
# bench_dirs USAGE BUILD_DIR OUT_DIR: sets build and out to absolute paths (OUT_DIR created).
bench_dirs() {
  [ $# -ge 3 ] || die "usage: $1"
  build=$(cd "$2" && pwd) || die "build dir $2 not found"
  mkdir -p "$3"
  out=$(cd "$3" && pwd)
}
# bench_prompt: sets prompt (the first prompt_len of 16 fixed ids, all below the tiny
# model's V = 512) and max_seq (the sequence rounded up to 64, at least 256: above
# Flash's window W = 128).
bench_prompt() {
  prompt=$(echo 17,4,99,250,3,42,7,311,8,64,128,5,77,19,2,401 | cut -d, -f1-"$prompt_len")
  max_seq=$(( (prompt_len + max_new + 63) / 64 * 64 ))
  [ "$max_seq" -ge 256 ] || max_seq=256
}
# bench_run_yaml FILE: the run config of model, backend, transport and max_seq.
bench_run_yaml() {
  printf 'model: %s\nbackend: %s\ntransport: %s\nplacement: auto\nmax_seq: %s\n' \
    "$model" "$backend" "$transport" "$max_seq" >"$1"
}
