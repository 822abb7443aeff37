// SIGINT / SIGTERM / SIGHUP (issue 17 item 6). Under mpirun, a signal to mpirun reaches
// every rank as SIGTERM; run directly, the process gets it itself. Each rank ends with
// exit status 128 + the signal number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP):
// partial outputs removed, logs flushed, one line. Rank 0 says it on stderr
// ("interrupted by SIGINT: stopping"); the other ranks write theirs to their log only,
// so the job prints one message. The first signal starts that orderly exit (bounded: it
// waits for no peer); a second one ends the process at once (a repeat within 300 ms is the
// same signal delivered twice, e.g. by GNU timeout to the child and its group: ignored).
#pragma once

#include <chrono>

namespace dsv4 {

// Installs the handlers (after MPI start-up, which may install its own) and starts the
// thread that carries out the exit. `linger`: the pause after the line before the exit
// (the engine's 500 ms lets every rank write its line under mpirun; a test takes longer to
// time a second signal inside it without racing the scheduler).
void watch_stop_signals(int rank, std::chrono::milliseconds linger = std::chrono::milliseconds(500));

}  // namespace dsv4
