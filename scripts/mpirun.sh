#!/usr/bin/env bash
# mpirun with the flags this machine needs: as root Open MPI refuses to start without
# --allow-run-as-root, and more ranks than cores need --oversubscribe.
set -euo pipefail
extra=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && extra+=(--allow-run-as-root)
exec mpirun "${extra[@]}" "$@"
