// Per-run statistics of a speculative run (SPECDECODE.md §5.5): a summary line for the
// rank log and the --spec-stats JSON file (schema in configs/README.md).
#pragma once
#include <string>

#include "stage/coordinator.h"

namespace dsv4 {

struct SpecSummary {
  int64_t rounds = 0, verify_rounds = 0;
  double accepts_per_round = 0;   // mean accepted drafts over verify rounds
  double tokens_per_round = 0;    // mean emitted tokens over all rounds
  double round_us = 0;            // mean round wall time
};

SpecSummary summarize(const GenerationResult& res);
// spec_depth: the run's depth cap, or RunConfig::kSpecDepthAuto (written "auto").
std::string spec_stats_json(const std::string& drafter, int spec_depth, const GenerationResult& res);
void write_spec_stats(const std::string& path, const std::string& json);

}  // namespace dsv4
