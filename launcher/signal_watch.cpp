#include "launcher/signal_watch.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <cstdlib>
#include <thread>

#include "launcher/process_exit.h"
#include "model/error.h"

namespace dsv4 {

namespace {
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}
}  // namespace

void block_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void watch_stop_signals(int rank) {
  std::thread([rank] {
    const sigset_t set = stop_signals();
    bool stopping = false;
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      const int code = 128 + sig;
      if (stopping) std::_Exit(code);  // the second signal: no more waiting
      stopping = true;
      std::thread([rank, sig, code] {
        exit_process(code, rank == 0 ? spdlog::level::err : spdlog::level::debug,
                     cat("rank ", rank, ": interrupted by ", sigabbrev_np(sig) ? "SIG" : "",
                         sigabbrev_np(sig) ? sigabbrev_np(sig) : strsignal(sig),
                         ": stopping (exit status ", code, ")"));
      }).detach();
    }
  }).detach();
}

}  // namespace dsv4
