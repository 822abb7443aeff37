// --stage-only R --replay DIR (ARCHITECTURE.md "Debugging a stage in isolation"): one
// process runs stage R alone over the operations dumped by --dump-boundary, in order,
// from the dumped inputs, and compares its outputs with the dumped outputs.
#pragma once
#include <spdlog/spdlog.h>

#include <string>

#include "kernels/ops.h"
#include "launcher/run_config.h"

namespace dsv4 {

// The layer range and P come from the dump. Prints one line per compared tensor (max
// |difference|) to stdout; returns true iff every one matches exactly.
bool replay_stage(const RunConfig& config, int rank, const std::string& dir, Ops& ops,
                  spdlog::logger& log);

}  // namespace dsv4
