#include "launcher/signal_watch.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "launcher/process_exit.h"
#include "base/error.h"

namespace dsv4 {

namespace {
int wake_fds[2] = {-1, -1};   // the handler's self-pipe to the exit thread
std::atomic<int> received{0};        // the first signal's number
std::atomic<long> first_at_ns{0};    // when it came (CLOCK_MONOTONIC); 0 while being set
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<long>::is_always_lock_free,
              "the handler's atomics must be lock-free to be async-signal-safe");

// A repeat this soon after the first signal is the same request delivered twice, not a
// second one: GNU timeout forwards a signal to its child and then to the child's process
// group, so the child takes it twice within microseconds. A person's second Ctrl-C comes
// later than this.
constexpr long kRepeatGraceNs = 300'000'000;

long monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe (POSIX)
  return now.tv_sec * 1'000'000'000L + now.tv_nsec;
}

// Any thread may take the signal; the handler only does what is async-signal-safe.
void on_stop_signal(int sig) {
  const long now = monotonic_ns();
  int none = 0;
  if (received.compare_exchange_strong(none, sig)) {
    first_at_ns.store(now);
    const unsigned char byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] const ssize_t n = write(wake_fds[1], &byte, 1);
    return;
  }
  const long first = first_at_ns.load();
  if (first == 0 || now - first < kRepeatGraceNs) return;  // a duplicate delivery
  _exit(128 + sig);  // the second signal: no more waiting
}
}  // namespace

void watch_stop_signals(int rank, std::chrono::milliseconds linger) {
  if (pipe2(wake_fds, O_CLOEXEC) != 0) return;  // no pipe: the default actions stay
  std::thread([rank, linger] {
    unsigned char byte = 0;
    while (read(wake_fds[0], &byte, 1) != 1) {
    }
    const int sig = byte, code = 128 + sig;
    const char* abbrev = sigabbrev_np(sig);
    // Under mpirun every rank gets the signal at once and the first rank to exit makes
    // mpirun kill the rest: a short pause after the line lets every rank write its own,
    // and rank 0's reach mpirun's output, before any rank is gone.
    exit_process(code, linger,
                 rank == 0 ? spdlog::level::err : spdlog::level::debug,
                 cat("rank ", rank, ": interrupted by ", abbrev ? "SIG" : "",
                     abbrev ? abbrev : strsignal(sig), ": stopping (exit status ", code, ")"));
  }).detach();
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

}  // namespace dsv4
