#include "launcher/serve.h"

#include <csignal>

namespace dsv4 {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void record_stop_signal(int sig) { g_stop_signal = sig; }
}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a signal
}

StopSignalWatcher::StopSignalWatcher(HttpServer& server)
    : thread_([&server](std::stop_token stop) {
        while (!stop.stop_requested()) {
          if (g_stop_signal != 0) {
            server.stop();
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }) {}

StopSignalWatcher::~StopSignalWatcher() { thread_.request_stop(); }

}  // namespace dsv4
