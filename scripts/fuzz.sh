#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined; tests/fuzz)
# into ${FUZZ_BUILD_DIR:-build-fuzz} and runs each for SECONDS (default 30) from its seed
# corpus (tests/fuzz/seeds/<target>, plus configs/*.yaml for the run config). New corpus
# entries and crash artifacts go to the build folder, never into the repository.
# Exit status 1 when any target finds a crash, a leak, a hang or a sanitizer report.
# usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (docs/fuzzing.md)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors model_config index run_config boundary_dump)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DDSV4_FUZZ=ON -DDSV4_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Release >&2
cmake --build "$build" -j"$(nproc)" $(printf -- '--target fuzz_%s ' "${targets[@]}") >&2

# seed_dir TARGET: the seed corpus as the fuzzer reads it. Binary seeds (a shard) are
# stored as their header JSON, named <name>.<data bytes>.json; the 8-byte length prefix
# and a zero data buffer are added here.
seed_dir() {
  local t=$1 out=$build/seeds/$1
  rm -rf "$out"; mkdir -p "$out"
  for f in "$root/tests/fuzz/seeds/$t"/*; do
    case "$t" in
      safetensors|boundary_dump)
        local n len; n=$(basename "$f" .json); n=${n##*.}; len=$(stat -c %s "$f")
        { printf "$(printf '\\%03o' $((len & 255)) $((len >> 8 & 255)) $((len >> 16 & 255)) \
              $((len >> 24 & 255)) 0 0 0 0)"; cat "$f"; head -c "$n" /dev/zero; } > "$out/$(basename "$f")" ;;
      *) cp "$f" "$out/" ;;
    esac
  done
  [ "$t" != run_config ] || cp "$root"/configs/*.yaml "$out/"
  echo "$out"
}

status=0
for t in "${targets[@]}"; do
  seeds=$(seed_dir "$t")
  corpus=$build/corpus/$t; artifacts=$build/artifacts/$t/
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz: $t for ${seconds} s" >&2
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" "$seeds" \
       > "$build/fuzz_$t.log" 2>&1; then
    status=1
    echo "fuzz: $t FAILED (artifacts in $artifacts):" >&2
    tail -40 "$build/fuzz_$t.log" >&2
  else
    echo "fuzz: $t: $(grep -E 'stat::number_of_executed_units' "$build/fuzz_$t.log" | awk '{print $2}') runs, no crash" >&2
  fi
done
exit $status
