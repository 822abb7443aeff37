#include "launcher/run_config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "model/error.h"
#include "stage/depth_schedule.h"
#include "stage/replay_drafter.h"

namespace dsv4 {

const char* backend_name(Backend b) { return b == Backend::cuda ? "cuda" : "cpu"; }
const char* transport_name(Transport t) { return t == Transport::nccl ? "nccl" : "mpi"; }

Backend parse_backend(const std::string& value, const std::string& key) {
  if (value == "cpu") return Backend::cpu;
  if (value == "cuda") return Backend::cuda;
  throw Error(cat(key, ": unknown backend '", value, "' (allowed: cpu, cuda)"));
}

Transport parse_transport(const std::string& value, const std::string& key) {
  if (value == "mpi") return Transport::mpi;
  if (value == "nccl") return Transport::nccl;
  throw Error(cat(key, ": unknown transport '", value, "' (allowed: mpi, nccl)"));
}

int64_t RunConfig::effective_max_seq(int64_t max_position_embeddings) const {
  if (max_seq == 0) return std::min(max_position_embeddings, kDefaultMaxSeq);
  if (max_seq > max_position_embeddings)
    throw Error(cat("max_seq: ", max_seq, " exceeds the model's max_position_embeddings ",
                    max_position_embeddings));
  return max_seq;
}

namespace {

// Every value read goes through here so a bad one is refused by its key.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  std::string where(const std::string& key) const {
    return source_.empty() ? key : cat(source_, ": ", key);
  }
  std::string scalar(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) throw Error(cat(where(key), ": expected a single value"));
    return n.Scalar();
  }
  int64_t integer(const YAML::Node& n, const std::string& key, int64_t min) const {
    const std::string text = scalar(n, key);
    int64_t v = 0;
    size_t used = 0;
    try {
      v = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size())
      throw Error(cat(where(key), ": '", text, "' is not an integer"));
    if (v < min) throw Error(cat(where(key), ": ", v, " is below the minimum ", min));
    return v;
  }
  bool boolean(const YAML::Node& n, const std::string& key) const {
    const std::string text = scalar(n, key);
    if (text == "true") return true;
    if (text == "false") return false;
    throw Error(cat(where(key), ": '", text, "' (allowed: true, false)"));
  }
  std::vector<int64_t> integers(const YAML::Node& n, const std::string& key, int64_t min) const {
    if (!n.IsSequence()) throw Error(cat(where(key), ": expected a list of integers"));
    std::vector<int64_t> out;
    for (size_t i = 0; i < n.size(); ++i) out.push_back(integer(n[i], cat(key, "[", i, "]"), min));
    return out;
  }

 private:
  std::string source_;
};

// The value of a text that is exactly one integer, else -1 (callers accept only >= 0).
long long whole_integer(const std::string& text) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  return used == text.size() ? v : -1;
}

std::string resolve_path(const std::string& p, const std::string& base_dir) {
  const std::filesystem::path path(p);
  if (path.is_absolute() || base_dir.empty()) return path.lexically_normal().string();
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

// Each entry is [begin, end); emptiness, order, overlap, bounds and the count against P
// are checked with the model when the ranks are known (plan_placement).
std::vector<LayerRange> parse_placement(const Reader& rd, const YAML::Node& n) {
  if (n.IsScalar()) {
    if (n.Scalar() == "auto") return {};
    throw Error(cat(rd.where("placement"), ": '", n.Scalar(),
                    "' (allowed: auto, or a list of [begin, end) layer ranges, one per rank)"));
  }
  if (!n.IsSequence() || n.size() == 0)
    throw Error(cat(rd.where("placement"), ": expected auto or a non-empty list of [begin, end)"));
  std::vector<LayerRange> ranges;
  for (size_t r = 0; r < n.size(); ++r) {
    const std::string key = cat("placement[", r, "]");
    const auto pair = rd.integers(n[r], key, 0);
    if (pair.size() != 2) throw Error(cat(rd.where(key), ": expected [begin, end)"));
    ranges.push_back({static_cast<int>(pair[0]), static_cast<int>(pair[1])});
  }
  return ranges;
}

}  // namespace

RunConfig parse_run_config(const std::string& yaml_text, const std::string& source,
                           const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error(cat(source, ": not valid YAML: ", e.what()));
  }
  const Reader rd(source);
  RunConfig c;
  c.source = source;
  if (root.IsNull()) return c;
  if (!root.IsMap()) throw Error(cat(source, ": expected a mapping of keys to values"));

  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "model") c.model = resolve_path(rd.scalar(v, key), base_dir);
    else if (key == "backend") c.backend = parse_backend(rd.scalar(v, key), rd.where(key));
    else if (key == "transport") c.transport = parse_transport(rd.scalar(v, key), rd.where(key));
    else if (key == "placement") c.placement = parse_placement(rd, v);
    else if (key == "max_seq") c.max_seq = rd.integer(v, key, 1);
    else if (key == "max_new") c.max_new = rd.integer(v, key, 1);
    else if (key == "prompt_ids") {
      c.prompt_ids.clear();
      for (int64_t id : rd.integers(v, key, 0)) c.prompt_ids.push_back(static_cast<int32_t>(id));
    } else if (key == "numerics") {
      if (!v.IsMap()) throw Error(cat(rd.where(key), ": expected a mapping"));
      for (const auto& opt : v) {
        const std::string name = opt.first.as<std::string>();
        try {
          set_numerics_option(c.numerics, name, rd.scalar(opt.second, cat("numerics.", name)));
        } catch (const Error& e) {
          throw Error(source.empty() ? std::string(e.what()) : cat(source, ": ", e.what()));
        }
      }
    } else if (key == "devices") {
      c.devices.clear();
      for (int64_t d : rd.integers(v, key, 0)) c.devices.push_back(static_cast<int>(d));
    } else if (key == "log_dir") c.log_dir = resolve_path(rd.scalar(v, key), base_dir);
    else if (key == "dump_boundary") c.dump_boundary = resolve_path(rd.scalar(v, key), base_dir);
    else if (key == "drafter") c.drafter = rd.scalar(v, key);
    else if (key == "spec_depth") c.spec_depth = parse_spec_depth(rd.scalar(v, key), rd.where(key));
    else if (key == "spec_costs") c.spec_costs = resolve_path(rd.scalar(v, key), base_dir);
    else if (key == "stop_ids") {
      c.stop_ids.clear();
      for (int64_t id : rd.integers(v, key, 0)) c.stop_ids.push_back(static_cast<int32_t>(id));
    }
    else if (key == "profile_ops") c.profile_ops = rd.boolean(v, key);
    else
      throw Error(cat(rd.where(key), ": unknown key (known: model, backend, transport, "
                      "placement, max_seq, prompt_ids, max_new, numerics, devices, log_dir, "
                      "dump_boundary, drafter, spec_depth, spec_costs, profile_ops, stop_ids)"));
  }
  return c;
}

RunConfig load_run_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(cat("--config ", path, ": cannot open the run config"));
  std::stringstream text;
  text << in.rdbuf();
  const auto base = std::filesystem::absolute(path).parent_path().string();
  return parse_run_config(text.str(), path, base);
}

void check_run_config(const RunConfig& c) {
  if (c.model.empty()) throw Error("model: no checkpoint directory (set model: or --model)");
  if (c.drafter != "none") {
    const bool known = c.drafter == "dspark" || c.drafter.starts_with(kReplayPrefix);
    if (!known)
      throw Error(cat("drafter: unknown drafter '", c.drafter,
                      "' (allowed: none, dspark, replay:FILE)"));
    if (c.drafter != "dspark") parse_replay_spec(c.drafter.substr(kReplayPrefix.size()));  // names the culprit
  }
  if (c.spec_depth == RunConfig::kSpecDepthAuto && c.drafter == "none")
    throw Error("spec_depth: auto schedules the verify depth of speculative rounds and needs a "
                "drafter (drafter: / --drafter)");
  if (!c.spec_costs.empty()) {
    if (c.spec_depth != RunConfig::kSpecDepthAuto)
      throw Error(cat("spec_costs: ", c.spec_costs, " is only read with spec_depth: auto"));
    read_verify_costs(c.spec_costs);  // names the file and the field
  }
  if (c.effective_transport() == Transport::nccl && c.backend != Backend::cuda)
    throw Error("transport: nccl moves device memory and needs backend: cuda");
}

int parse_spec_depth(const std::string& text, const std::string& what) {
  if (text == "auto") return RunConfig::kSpecDepthAuto;
  const long long v = whole_integer(text);
  if (v < 0 || v > INT32_MAX)
    throw Error(cat(what, ": '", text, "' (allowed: auto, or a depth cap 0..", INT32_MAX,
                    "; 0 = dspark_block_size + 1)"));
  return static_cast<int>(v);
}

std::string spec_depth_name(int spec_depth) {
  return spec_depth == RunConfig::kSpecDepthAuto ? "auto" : std::to_string(spec_depth);
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const long long v = whole_integer(item);
    if (v < 0 || v > INT32_MAX)
      throw Error(cat(what, ": '", item, "' is not a token id (expected e.g. 1,2,3)"));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw Error(cat(what, ": empty list of token ids"));
  return ids;
}

}  // namespace dsv4
