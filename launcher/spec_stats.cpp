#include "launcher/spec_stats.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "launcher/output_files.h"
#include "launcher/run_config.h"
#include "base/error.h"

namespace dsv4 {

SpecSummary summarize(const GenerationResult& res) {
  SpecSummary s;
  s.rounds = static_cast<int64_t>(res.rounds.size());
  double accepts = 0, emitted = 0, us = 0;
  for (const SpecRound& r : res.rounds) {
    if (r.t_batch > 0) {
      ++s.verify_rounds;
      accepts += r.accepts;
    }
    emitted += r.emitted;
    us += r.round_us;
  }
  if (s.verify_rounds) s.accepts_per_round = accepts / static_cast<double>(s.verify_rounds);
  if (s.rounds) {
    s.tokens_per_round = emitted / static_cast<double>(s.rounds);
    s.round_us = us / static_cast<double>(s.rounds);
  }
  return s;
}

std::string spec_stats_json(const std::string& drafter, int spec_depth, const GenerationResult& res) {
  const SpecSummary s = summarize(res);
  nlohmann::json j;
  j["drafter"] = drafter;
  if (spec_depth == RunConfig::kSpecDepthAuto) {
    j["spec_depth"] = "auto";
  } else {
    j["spec_depth"] = spec_depth;
  }
  j["tokens"] = res.tokens.size();
  j["rounds"] = s.rounds;
  j["verify_rounds"] = s.verify_rounds;
  j["accepts_per_round"] = s.accepts_per_round;
  j["tokens_per_round"] = s.tokens_per_round;
  j["round_us_mean"] = s.round_us;
  j["ended_by_carry"] = res.ended_by_carry;
  j["stopped"] = res.stopped;  // the last token is a stop id (S6)
  nlohmann::json rounds = nlohmann::json::array();
  for (const SpecRound& r : res.rounds) {
    nlohmann::json c = nlohmann::json::array();  // NaN confidences (S9) become null
    for (float v : r.confidence) c.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
    rounds.push_back({{"start_pos", r.start_pos}, {"drafts", r.drafts}, {"accepts", r.accepts},
                      {"verified", r.verified}, {"t_batch", r.t_batch}, {"t_cap", r.t_cap},
                      {"confidence", c}, {"emitted", r.emitted}, {"round_us", r.round_us}});
  }
  j["round_records"] = std::move(rounds);
  return j.dump(1) + "\n";
}

void write_spec_stats(const std::string& path, const std::string& json) {
  write_file_atomically(path, json, "--spec-stats");
}

}  // namespace dsv4
