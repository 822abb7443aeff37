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

namespace dsv4 {

enum class Backend { cpu, cuda };
enum class Transport { mpi, nccl };
const char* backend_name(Backend b);
const char* transport_name(Transport t);
Backend parse_backend(const std::string& value, const std::string& key);
Transport parse_transport(const std::string& value, const std::string& key);

struct RunConfig {
  std::string source;                       // the YAML's path ("" when built in code)
  std::string model;                        // checkpoint directory
  Backend backend = Backend::cpu;
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

  static constexpr int64_t kDefaultMaxSeq = 4096;
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

// `spec_depth` / `--spec-depth`: "auto" (kSpecDepthAuto) or an integer >= 0; `what`
// names the key or flag.
int parse_spec_depth(const std::string& text, const std::string& what);
std::string spec_depth_name(int spec_depth);  // "auto" or the number

// Comma-separated integers ("1,2,3"), for --prompt-ids and --stop-ids; `what` names the flag.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what);

}  // namespace dsv4
