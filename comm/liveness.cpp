#include "comm/liveness.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "comm/mpi_check.h"

namespace dsv4 {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kTagBeat = 1;
constexpr char kBeat = 1, kLeaving = 2;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A beat each interval: often enough that a timeout of a few seconds (the tests') sees
// several, rare enough to cost nothing.
std::chrono::milliseconds beat_interval(double timeout_s) {
  const double s = timeout_s > 0 ? std::clamp(timeout_s / 8, 0.05, 1.0) : 1.0;
  return std::chrono::milliseconds(static_cast<int>(s * 1000));
}

bool test(MPI_Request& req) {
  int done = 0;
  MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
  return done != 0;
}
}  // namespace

LivenessMonitor::LivenessMonitor(MPI_Comm comm, double timeout_s, OnSilent on_silent)
    : timeout_s_(timeout_s), on_silent_(std::move(on_silent)) {
  MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  if (size_ > 1) thread_ = std::thread([this] { run(); });
}

LivenessMonitor::~LivenessMonitor() { stop(); }

void LivenessMonitor::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  thread_.join();
}

void LivenessMonitor::run() {
  const auto n = static_cast<size_t>(size_);
  std::vector<MPI_Request> sends(n, MPI_REQUEST_NULL), recvs(n, MPI_REQUEST_NULL);
  std::vector<char> got(n), watched(n, 1);
  std::vector<Clock::time_point> last_seen(n, Clock::now());
  watched[static_cast<size_t>(rank_)] = 0;
  auto post_recv = [&](size_t r) {
    MPI_CHECK(MPI_Irecv(&got[r], 1, MPI_CHAR, static_cast<int>(r), kTagBeat, comm_, &recvs[r]));
  };
  auto send_all = [&](const char* byte) {
    for (size_t r = 0; r < n; ++r)
      if (static_cast<int>(r) != rank_ && (sends[r] == MPI_REQUEST_NULL || test(sends[r])))
        MPI_CHECK(MPI_Isend(byte, 1, MPI_CHAR, static_cast<int>(r), kTagBeat, comm_, &sends[r]));
  };
  for (size_t r = 0; r < n; ++r)
    if (watched[r]) post_recv(r);

  while (!stopping_) {
    send_all(&kBeat);
    for (size_t r = 0; r < n; ++r) {
      if (!watched[r]) continue;
      while (watched[r] && test(recvs[r])) {  // drain every beat that arrived
        last_seen[r] = Clock::now();
        if (got[r] == kLeaving) watched[r] = 0;
        else post_recv(r);
      }
      const double silent = seconds_since(last_seen[r]);
      const double timeout = timeout_s_;
      if (watched[r] && timeout > 0 && silent > timeout) on_silent_(static_cast<int>(r), silent);
    }
    const auto wake = Clock::now() + beat_interval(timeout_s_);
    while (!stopping_ && Clock::now() < wake) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Leaving: one last byte to every peer (sent once the previous beat has gone), then
  // the standing receives are withdrawn. A peer that stopped draining is not waited for.
  auto settle = [&](MPI_Request& req) {
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (req != MPI_REQUEST_NULL && !test(req) && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
  };
  for (MPI_Request& s : sends) settle(s);
  send_all(&kLeaving);
  for (size_t r = 0; r < n; ++r) {
    settle(sends[r]);
    if (recvs[r] != MPI_REQUEST_NULL) {
      MPI_Cancel(&recvs[r]);
      MPI_Wait(&recvs[r], MPI_STATUS_IGNORE);
    }
  }
}

}  // namespace dsv4
