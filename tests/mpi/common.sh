# Shared by the multi-rank test drivers (sourced). Usage in a driver:
#   source "$(dirname "$0")/common.sh"; run_np 3 --config ... [flags]
set -euo pipefail

MPIRUN=${MPIRUN:-mpirun}
mpirun_flags=(--oversubscribe)
if [ "$(id -u)" = 0 ]; then mpirun_flags+=(--allow-run-as-root); fi

fail() { echo "FAIL: $*" >&2; exit 1; }

# run_np P ARGS...: dsv4-stage on P ranks (P = 1 runs it without mpirun: the singleton).
run_np() {
  local p=$1; shift
  if [ "$p" = 1 ]; then "$EXE" "$@"; else "$MPIRUN" "${mpirun_flags[@]}" -np "$p" "$EXE" "$@"; fi
}

# count_of TEXT FILE: how many lines of FILE contain TEXT.
count_of() { grep -c -F -- "$1" "$2" || true; }
