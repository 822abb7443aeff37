#include "launcher/process_exit.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "launcher/output_files.h"

namespace dsv4 {

namespace {
std::mutex exit_mutex;
std::shared_ptr<spdlog::logger> exit_log;
int exit_rank = -1;
std::atomic<int> decided_code{-1};
}  // namespace

void note_exit_decided(int code) { decided_code.store(code); }

void set_exit_logger(int rank, std::shared_ptr<spdlog::logger> log) {
  std::lock_guard<std::mutex> lock(exit_mutex);
  exit_rank = rank;
  exit_log = std::move(log);
}

void exit_process(int code, spdlog::level::level_enum level, const std::string& line) {
  exit_process(code, std::chrono::milliseconds(0), level, line);
}

void exit_process(int code, std::chrono::milliseconds linger, spdlog::level::level_enum level,
                  const std::string& line) {
  std::unique_lock<std::mutex> lock(exit_mutex);  // one exit at a time; a second waits for _Exit
  remove_partial_outputs();
  if (const int decided = decided_code.load(); decided >= 0) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(decided);
  }
  if (exit_log) {
    exit_log->log(level, line);
    exit_log->debug("exit status {}", code);
    exit_log->flush();
  } else {
    std::fprintf(stderr, "[r%d] %s\n", exit_rank, line.c_str());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::this_thread::sleep_for(linger);
  std::_Exit(code);
}

}  // namespace dsv4
