// One spdlog logger per rank, prefixed [r<rank>] (CONVENTIONS.md "Logs and output"):
// info and above to stderr; with a log directory also everything from debug up
// (per-operation timings) to DIR/rank<r>.log; a log that cannot be written fails the
// run (issue 17 item 4).
#pragma once
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace dsv4 {

// A log line that cannot be written (full disk, I/O error) is remembered, not lost
// silently: check_rank_log throws the first such failure as an Error naming the file.
std::shared_ptr<spdlog::logger> make_rank_logger(int rank, const std::string& log_dir);
void check_rank_log();

}  // namespace dsv4
