// The dsv4-stage process (ARCHITECTURE.md): MPI start-up, the rank's role (rank 0 =
// coordinator + stage 0, the last rank = head), start-up agreement, the generation run,
// and the failure paths: a rank that throws reports its error once and every other rank
// exits non-zero with one line naming it; no rank hangs on a dead peer.
#pragma once

namespace dsv4 {

// Returns the process exit code (MPI_Init and MPI_Finalize happen inside; after a
// failure in a multi-rank run the process exits directly, see rank_process.cpp).
int run_process(int argc, char** argv);

}  // namespace dsv4
