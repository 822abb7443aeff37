// SIGINT / SIGTERM / SIGHUP (issue 17 item 6). Under mpirun, a signal to mpirun reaches
// every rank as SIGTERM; run directly, the process gets it itself. Each rank ends with
// exit status 128 + the signal number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP):
// partial outputs removed, logs flushed, one line. Rank 0 says it on stderr
// ("interrupted by SIGINT: stopping"); the other ranks write theirs to their log only,
// so the job prints one message. The first signal starts that orderly exit (bounded: it
// waits for no peer); a second SIGINT or SIGTERM ends the process at once.
#pragma once

namespace dsv4 {

// Blocks the signals in the calling thread; call first in main, before any thread
// (MPI's included) exists, so every thread inherits the mask.
void block_stop_signals();
// Starts the thread that waits for them (after MPI start-up, once the rank is known).
void watch_stop_signals(int rank);

}  // namespace dsv4
