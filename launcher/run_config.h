// The run config (YAML, configs/README.md documents every key): what to load, how to
// compute, how to split, what to generate. Unknown keys and bad values are refused with
// an Error naming the key (ARCHITECTURE.md law 6). Command-line flags override it
// (launcher/cli.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/numerics.h"
#include "model/placement.h"
#include "model/tensor_view.h"
#include "stage/sampler.h"

namespace dsv4 {

enum class Backend { cpu, cuda };
enum class Transport { mpi, nccl };
const char* backend_name(Backend b);
const char* transport_name(Transport t);
Backend parse_backend(const std::string& value, const std::string& key);
Transport parse_transport(const std::string& value, const std::string& key);

// `weights: synthetic` (issue 11): each rank generates its own layers' tensors in place
// (device memory for cuda), exactly as dsv4-mkckpt --preset P --seed N [--trunk-layers T]
// [--experts R] writes them; no checkpoint directory is read.
struct SyntheticWeights {
  std::string preset = "tiny";              // tiny | flash
  int trunk_layers = 0;                     // flash only: layers 0..T-1 without the drafter
  ExpertRecipe experts = ExpertRecipe::nvfp4;
  uint64_t seed = 1;
  bool share_layers = false;                // benchmark: layers of one kind share tensors
};

struct RunConfig {
  std::string source;                       // the YAML's path ("" when built in code)
  std::string model;                        // checkpoint directory
  std::optional<SyntheticWeights> synthetic;  // weights: synthetic (model: unused)
  std::optional<Backend> backend;           // unset: launcher/backend_default.h decides
  std::optional<Transport> transport;       // unset: mpi for cpu, nccl for cuda
  std::vector<LayerRange> placement;        // empty: auto (balance resident bytes)
  int64_t max_seq = 0;                      // 0: min(max_position_embeddings, kDefaultMaxSeq)
  std::vector<int32_t> prompt_ids;
  int64_t max_new = 16;
  Numerics numerics;
  std::vector<int> devices;                 // optional GPU per rank (backend cuda)
  std::string log_dir;                      // "" : stderr only
  std::string dump_boundary;                // "" : no dumps
  std::string drafter = "none";             // none | dspark | replay:FILE (SPECDECODE.md)
  int spec_depth = 0;                       // 0: default depth (S3); kSpecDepthAuto: auto
  std::string spec_costs;                   // spec_depth auto: cost table ("" : built-in)
  std::vector<int32_t> stop_ids;            // SPECDECODE S6; empty: run to max_new
  bool profile_ops = false;                 // per-op decode timing table in each rank's log
  bool cuda_graphs = true;                  // plain decode steps as captured CUDA graphs
  bool cuda_pdl = true;                     // kernels launched with Programmatic Dependent Launch
  double liveness_timeout_s = kDefaultLivenessTimeout;  // a silent peer is declared failed; 0: never
  // Text generation (issue 14): a text prompt instead of prompt_ids, read by the
  // checkpoint's tokenizer; the output is streamed as text.
  std::string prompt;                       // prompt: / prompt_file: (read into it)
  bool chat = false;                        // the prompt is a user message (chat layout)
  std::string system;                       // chat: the system message ("" none)
  bool thinking = false;                    // chat: thinking marker instead of non-thinking
  std::vector<std::string> stop;            // stop strings (not shown in the output)
  bool ignore_eos = false;                  // text runs stop at EOS unless set
  SamplingParams sampling;                  // temperature (0 greedy), top_k, top_p, min_p, seed
  bool seed_set = false;                    // seed given; else rank 0 draws one and logs it
  int64_t max_prompt = 0;                   // text / serve: longest prompt, 0 = max_seq
  int64_t prefill_chunk = kDefaultPrefillChunk;  // rows of one prefill operation, 0 = whole prompts
  bool serve = false;                       // --serve: prompts come from requests

  static constexpr int64_t kDefaultMaxSeq = 4096;
  // Issue 13: a prompt goes through the stages in chunks of this many rows, so the
  // workspace (and each boundary payload) is bounded at any prompt length; 2048 rows
  // keep the per-chunk weight reads of a Flash prefill small next to its GEMM work.
  static constexpr int64_t kDefaultPrefillChunk = 2048;
  // comm/liveness.h: heartbeats run beside the work (loads and prefills keep beating),
  // so only a stopped or unreachable process is silent; 5 minutes leaves room for a host
  // stalled by memory pressure while an 80+ GB checkpoint is mapped.
  static constexpr double kDefaultLivenessTimeout = 300.0;
  static constexpr int kSpecDepthAuto = -1;  // `spec_depth: auto` (stage/depth_schedule.h)
  Transport effective_transport() const {
    return transport.value_or(backend == Backend::cuda ? Transport::nccl : Transport::mpi);
  }
  // max_seq for a model whose config allows `max_position_embeddings`; refuses more.
  int64_t effective_max_seq(int64_t max_position_embeddings) const;
};

// Parses YAML text. Relative paths (model, log_dir, dump_boundary) are resolved against
// `base_dir` (the config file's folder). Throws Error naming `source` and the key.
RunConfig parse_run_config(const std::string& yaml_text, const std::string& source,
                           const std::string& base_dir);
RunConfig load_run_config(const std::string& path);

// Checks the combination of settings this build can run (drafter availability, devices
// only with cuda, nccl only with cuda); throws Error naming the key or flag.
void check_run_config(const RunConfig& c);

// Reads a prompt file (prompt_file: / --prompt-file); throws Error naming `what` and it.
std::string read_prompt_file(const std::string& path, const std::string& what);

// `spec_depth` / `--spec-depth` as written: "auto" (kSpecDepthAuto) or the number.
std::string spec_depth_name(int spec_depth);

// Comma-separated integers ("1,2,3"), for --prompt-ids and --stop-ids; `what` names the flag.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what);

}  // namespace dsv4
