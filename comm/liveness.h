// Liveness (issue 17 item 3; ARCHITECTURE.md "no rank may hang waiting for a peer"): a
// rank that stops responding (SIGSTOP, a frozen host, a lost link) never reports an
// error, so its peers would wait forever. Every rank runs a heartbeat thread on its own
// duplicate of the communicator: it sends a one-byte beat to every peer each interval
// and watches theirs. The beats run beside the work (a long load or prefill keeps
// beating), so silence means the process itself is stopped or unreachable. A peer silent
// for longer than the timeout is reported to `on_silent`, which ends this process.
// Needs MPI_THREAD_MULTIPLE. comm moves bytes and knows no model.
#pragma once
#include <mpi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

namespace dsv4 {

class LivenessMonitor {
 public:
  // on_silent(rank, seconds silent) runs on the heartbeat thread and must not return.
  using OnSilent = std::function<void(int, double)>;
  // Collective over `comm` (duplicates it). timeout_s <= 0: beat, never declare.
  LivenessMonitor(MPI_Comm comm, double timeout_s, OnSilent on_silent);
  ~LivenessMonitor();  // stop()
  LivenessMonitor(const LivenessMonitor&) = delete;
  LivenessMonitor& operator=(const LivenessMonitor&) = delete;

  void set_timeout(double timeout_s) { timeout_s_ = timeout_s; }
  double timeout() const { return timeout_s_; }
  // Tells every peer this rank leaves on purpose (they stop watching it) and ends the
  // thread; call before MPI_Finalize. Idempotent.
  void stop();

 private:
  void run();

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::atomic<double> timeout_s_;
  std::atomic<bool> stopping_{false};
  OnSilent on_silent_;
  std::thread thread_;
};

}  // namespace dsv4
