#!/usr/bin/env bash
# mpirun with the flags this machine needs: as root Open MPI refuses to start without
# --allow-run-as-root, and more ranks than cores need --oversubscribe. NCCL settings in
# the environment (e.g. NCCL_NVLS_ENABLE=0 on the GPU machine) are passed to every rank.
set -euo pipefail
extra=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && extra+=(--allow-run-as-root)
for v in $(compgen -e | grep '^NCCL_' || true); do extra+=(-x "$v"); done
exec mpirun "${extra[@]}" "$@"
