// `dsv4-stage --serve` (issue 14): SIGINT / SIGTERM on any rank only raise a flag; on
// rank 0 a watcher turns the flag into HttpServer::stop() (drain), and when the queue is
// drained rank 0 sends the stop operation, so every rank leaves cleanly.
#pragma once
#include <thread>

#include "launcher/http_server.h"

namespace dsv4 {

// Process-wide handlers that record the signal (every rank of a serve run).
void install_stop_signals();

// Rank 0: drains `server` once a stop signal arrives; joins on destruction.
class StopSignalWatcher {
 public:
  explicit StopSignalWatcher(HttpServer& server);
  ~StopSignalWatcher();

 private:
  std::jthread thread_;
};

}  // namespace dsv4
