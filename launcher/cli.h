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
  bool version = false;                     // --version
  std::string config;                       // --config (required unless --help)
  std::optional<std::string> model, log_dir, dump_boundary, backend, drafter, spec_costs;
  std::optional<std::vector<int32_t>> prompt_ids, stop_ids;
  std::optional<int64_t> max_new;
  std::optional<int> spec_depth;
  std::optional<double> liveness_timeout_s;  // --liveness-timeout SECONDS
  bool profile_ops = false;                 // --profile-ops (sets profile_ops: true)
  bool no_cuda_graphs = false;              // --no-cuda-graphs (sets cuda_graphs: false)
  bool no_cuda_pdl = false;                 // --no-cuda-pdl (sets cuda_pdl: false)
  std::string dump_logits;                  // --dump-logits FILE.json
  std::string spec_stats;                   // --spec-stats FILE.json (speculative runs)
  std::optional<int> stage_only;            // --stage-only R (with --replay DIR)
  std::string replay;
  // Text generation and sampling (issue 14); each overrides its YAML key.
  std::optional<std::string> prompt, system;     // --prompt / --prompt-file, --system
  std::optional<std::vector<std::string>> stop;  // --stop (repeatable)
  std::optional<double> temperature, top_p, min_p;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  std::optional<int64_t> max_prompt;
  std::optional<int64_t> prefill_chunk;          // --prefill-chunk N (0 = whole prompts)
  bool chat = false, thinking = false, ignore_eos = false;
  // The OpenAI-compatible server on rank 0 (--serve).
  bool serve = false;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model_name;                        // --model-name ("" : the checkpoint folder's name)
};

// Throws Error naming the flag.
CliOptions parse_cli(int argc, char** argv);
// Flags win over the YAML; paths given on the command line stay relative to the cwd.
void apply_cli(const CliOptions& cli, RunConfig& config);
std::string help_text();

}  // namespace dsv4
