#include "launcher/rank_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <filesystem>
#include <mutex>

#include "base/error.h"

namespace dsv4 {

namespace {
std::mutex log_failure_mutex;
std::string log_failure;  // the first write failure of the rank's log file
}  // namespace

void check_rank_log() {
  std::lock_guard<std::mutex> lock(log_failure_mutex);
  if (!log_failure.empty()) throw Error(log_failure);
}

std::shared_ptr<spdlog::logger> make_rank_logger(int rank, const std::string& log_dir) {
  const std::string prefix = cat("[r", rank, "] ");
  auto to_stderr = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  to_stderr->set_pattern(prefix + "%v");
  to_stderr->set_level(spdlog::level::info);
  std::vector<spdlog::sink_ptr> sinks{to_stderr};
  std::string path;
  if (!log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(log_dir, ec);  // several ranks may race here
    path = cat(log_dir, "/rank", rank, ".log");
    try {
      auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, true);
      file->set_pattern("%Y-%m-%d %H:%M:%S.%e " + prefix + "[%l] %v");
      file->set_level(spdlog::level::debug);
      sinks.push_back(file);
    } catch (const spdlog::spdlog_ex& e) {
      throw Error(cat("log_dir: cannot write ", path, ": ", e.what()));
    }
  }
  auto logger = std::make_shared<spdlog::logger>(cat("r", rank), sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::debug);
  logger->flush_on(spdlog::level::debug);  // a failing rank's last lines must reach the file
  logger->set_error_handler([path](const std::string& what) {
    std::lock_guard<std::mutex> lock(log_failure_mutex);
    if (log_failure.empty())
      log_failure = path.empty() ? cat("cannot write the log to stderr: ", what)
                                 : cat("log_dir: cannot write ", path, ": ", what);
  });
  return logger;
}

}  // namespace dsv4
