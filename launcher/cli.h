// The dsv4-stage command line. Flags override the run config's keys; --help explains
// every flag and the YAML keys (configs/README.md has the full reference).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/run_config.h"

namespace dsv4 {

struct CliOptions {
  bool help = false;
  std::string config;                       // --config (required unless --help)
  std::optional<std::string> model, log_dir, dump_boundary, backend, drafter, spec_costs;
  std::optional<std::vector<int32_t>> prompt_ids, stop_ids;
  std::optional<int64_t> max_new;
  std::optional<int> spec_depth;
  bool profile_ops = false;                 // --profile-ops (sets profile_ops: true)
  std::string dump_logits;                  // --dump-logits FILE.json
  std::string spec_stats;                   // --spec-stats FILE.json (speculative runs)
  std::optional<int> stage_only;            // --stage-only R (with --replay DIR)
  std::string replay;
};

// Throws Error naming the flag.
CliOptions parse_cli(int argc, char** argv);
// Flags win over the YAML; paths given on the command line stay relative to the cwd.
void apply_cli(const CliOptions& cli, RunConfig& config);
std::string help_text();

}  // namespace dsv4
