// One spdlog logger per rank, prefixed [r<rank>] (CONVENTIONS.md "Logs and output"):
// info and above to stderr; with a log directory also everything from debug up
// (per-operation timings) to DIR/rank<r>.log.
#pragma once
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace dsv4 {

std::shared_ptr<spdlog::logger> make_rank_logger(int rank, const std::string& log_dir);

}  // namespace dsv4
