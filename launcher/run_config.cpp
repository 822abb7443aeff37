#include "launcher/run_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <climits>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"
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
  // The whole scalar as a decimal integer in [min, max] (no truncation: a value past
  // int64 is refused as out of range, one past `max` by its bound).
  int64_t integer(const YAML::Node& n, const std::string& key, int64_t min,
                  int64_t max = INT64_MAX) const {
    const std::string text = scalar(n, key);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range)
      throw Error(cat(where(key), ": ", text, " is out of range (at most ", max, ")"));
    if (ec != std::errc() || end != text.data() + text.size() || text.empty())
      throw Error(cat(where(key), ": '", text, "' is not an integer"));
    if (v < min) throw Error(cat(where(key), ": ", v, " is below the minimum ", min));
    if (v > max) throw Error(cat(where(key), ": ", v, " is above the maximum ", max));
    return v;
  }
  // A finite decimal number >= min (seconds and the like).
  double number(const YAML::Node& n, const std::string& key, double min) const {
    const std::string text = scalar(n, key);
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() || !std::isfinite(v))
      throw Error(cat(where(key), ": '", text, "' is not a finite number"));
    if (v < min) throw Error(cat(where(key), ": ", v, " is below the minimum ", min));
    return v;
  }
  double number(const YAML::Node& n, const std::string& key) const {
    const std::string text = scalar(n, key);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size()) throw Error(cat(where(key), ": '", text, "' is not a number"));
    return v;
  }
  std::vector<std::string> strings(const YAML::Node& n, const std::string& key) const {
    if (n.IsScalar()) return {n.Scalar()};
    if (!n.IsSequence()) throw Error(cat(where(key), ": expected a string or a list of strings"));
    std::vector<std::string> out;
    for (size_t i = 0; i < n.size(); ++i) out.push_back(scalar(n[i], cat(key, "[", i, "]")));
    return out;
  }
  bool boolean(const YAML::Node& n, const std::string& key) const {
    const std::string text = scalar(n, key);
    if (text == "true") return true;
    if (text == "false") return false;
    throw Error(cat(where(key), ": '", text, "' (allowed: true, false)"));
  }
  std::vector<int64_t> integers(const YAML::Node& n, const std::string& key, int64_t min,
                                int64_t max = INT64_MAX) const {
    if (!n.IsSequence()) throw Error(cat(where(key), ": expected a list of integers"));
    std::vector<int64_t> out;
    for (size_t i = 0; i < n.size(); ++i)
      out.push_back(integer(n[i], cat(key, "[", i, "]"), min, max));
    return out;
  }
  // 32-bit values (token ids, layer indices, devices, depths) read at full width first.
  std::vector<int32_t> int32s(const YAML::Node& n, const std::string& key, int64_t min) const {
    std::vector<int32_t> out;
    for (int64_t v : integers(n, key, min, INT32_MAX)) out.push_back(static_cast<int32_t>(v));
    return out;
  }
  // A mapping whose keys are plain scalars, each once (yaml-cpp keeps both copies of a
  // repeated key and the later would silently win).
  void check_mapping(const YAML::Node& n, const std::string& what) const {
    std::set<std::string> seen;
    for (const auto& kv : n) {
      if (!kv.first.IsScalar())
        throw Error(cat(where(what), ": a key is not a plain name"));
      if (!seen.insert(kv.first.Scalar()).second)
        throw Error(cat(where(what.empty() ? kv.first.Scalar() : cat(what, ".", kv.first.Scalar())),
                        ": key given twice"));
    }
  }

 private:
  std::string source_;
};

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
    const auto pair = rd.int32s(n[r], key, 0);
    if (pair.size() != 2) throw Error(cat(rd.where(key), ": expected [begin, end)"));
    ranges.push_back({static_cast<int>(pair[0]), static_cast<int>(pair[1])});
  }
  return ranges;
}

}  // namespace

namespace {

// The synthetic-weights keys (SyntheticWeights); false when `key` is none of them.
bool parse_synthetic_key(const Reader& rd, const std::string& key, const YAML::Node& v, RunConfig& c) {
  static const char* const keys[] = {"weights", "preset", "trunk_layers", "experts", "weights_seed",
                                     "share_layers"};
  if (std::find(std::begin(keys), std::end(keys), key) == std::end(keys)) return false;
  if (key == "weights") {
    const std::string w = rd.scalar(v, key);
    if (w != "synthetic" && w != "checkpoint")
      throw Error(cat(rd.where(key), ": '", w, "' (allowed: checkpoint, synthetic)"));
    if (w == "synthetic" && !c.synthetic) c.synthetic.emplace();
    if (w == "checkpoint") c.synthetic.reset();
    return true;
  }
  if (!c.synthetic)
    throw Error(cat(rd.where(key), ": only with weights: synthetic (given before it, or without it)"));
  SyntheticWeights& s = *c.synthetic;
  if (key == "preset") {
    s.preset = rd.scalar(v, key);
    if (s.preset != "tiny" && s.preset != "flash")
      throw Error(cat(rd.where(key), ": '", s.preset, "' (allowed: tiny, flash)"));
  } else if (key == "trunk_layers") {
    s.trunk_layers = static_cast<int>(rd.integer(v, key, 1, 43));  // Flash has 43 trunk layers
  } else if (key == "experts") {
    const std::string r = rd.scalar(v, key);
    if (r != "nvfp4" && r != "mxfp4") throw Error(cat(rd.where(key), ": '", r, "' (allowed: nvfp4, mxfp4)"));
    s.experts = r == "nvfp4" ? ExpertRecipe::nvfp4 : ExpertRecipe::mxfp4;
  } else if (key == "weights_seed") {
    s.seed = static_cast<uint64_t>(rd.integer(v, key, 0));  // the writer's --seed range: [0, 2^63)
  } else {
    s.share_layers = rd.boolean(v, key);
  }
  return true;
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
  rd.check_mapping(root, "");

  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "model") c.model = resolve_path(rd.scalar(v, key), base_dir);
    else if (key == "backend") c.backend = parse_backend(rd.scalar(v, key), rd.where(key));
    else if (key == "transport") c.transport = parse_transport(rd.scalar(v, key), rd.where(key));
    else if (key == "placement") c.placement = parse_placement(rd, v);
    else if (key == "max_seq") c.max_seq = rd.integer(v, key, 1);
    else if (key == "max_new") c.max_new = rd.integer(v, key, 1);
    else if (key == "prompt_ids") c.prompt_ids = rd.int32s(v, key, 0);
    else if (key == "numerics") {
      if (!v.IsMap()) throw Error(cat(rd.where(key), ": expected a mapping"));
      rd.check_mapping(v, key);
      for (const auto& opt : v) {
        const std::string name = opt.first.as<std::string>();
        try {
          set_numerics_option(c.numerics, name, rd.scalar(opt.second, cat("numerics.", name)));
        } catch (const Error& e) {
          throw Error(source.empty() ? std::string(e.what()) : cat(source, ": ", e.what()));
        }
      }
    } else if (key == "devices") {
      const auto devices = rd.int32s(v, key, 0);
      c.devices.assign(devices.begin(), devices.end());
    } else if (key == "log_dir") c.log_dir = resolve_path(rd.scalar(v, key), base_dir);
    else if (key == "dump_boundary") c.dump_boundary = resolve_path(rd.scalar(v, key), base_dir);
    else if (key == "drafter") c.drafter = rd.scalar(v, key);
    else if (key == "spec_depth")
      c.spec_depth = rd.scalar(v, key) == "auto" ? RunConfig::kSpecDepthAuto
                                                 : static_cast<int>(rd.integer(v, key, 0, INT32_MAX));
    else if (key == "spec_costs") c.spec_costs = resolve_path(rd.scalar(v, key), base_dir);
    else if (key == "stop_ids") c.stop_ids = rd.int32s(v, key, 0);
    else if (key == "profile_ops") c.profile_ops = rd.boolean(v, key);
    else if (key == "cuda_graphs") c.cuda_graphs = rd.boolean(v, key);
    else if (key == "cuda_pdl") c.cuda_pdl = rd.boolean(v, key);
    else if (key == "liveness_timeout_s") c.liveness_timeout_s = rd.number(v, key, 0);
    else if (key == "prompt") c.prompt = rd.scalar(v, key);
    else if (key == "prompt_file")
      c.prompt = read_prompt_file(resolve_path(rd.scalar(v, key), base_dir), rd.where(key));
    else if (key == "chat") c.chat = rd.boolean(v, key);
    else if (key == "system") c.system = rd.scalar(v, key);
    else if (key == "thinking") c.thinking = rd.boolean(v, key);
    else if (key == "stop") c.stop = rd.strings(v, key);
    else if (key == "ignore_eos") c.ignore_eos = rd.boolean(v, key);
    else if (key == "temperature") c.sampling.temperature = rd.number(v, key);
    else if (key == "top_k") c.sampling.top_k = static_cast<int>(rd.integer(v, key, 0));
    else if (key == "top_p") c.sampling.top_p = rd.number(v, key);
    else if (key == "min_p") c.sampling.min_p = rd.number(v, key);
    else if (key == "seed") {
      c.sampling.seed = static_cast<uint64_t>(rd.integer(v, key, 0));
      c.seed_set = true;
    } else if (key == "max_prompt") c.max_prompt = rd.integer(v, key, 1);
    else if (key == "prefill_chunk") c.prefill_chunk = rd.integer(v, key, 0, INT32_MAX);
    else if (parse_synthetic_key(rd, key, v, c)) continue;
    else
      throw Error(cat(rd.where(key), ": unknown key (known: model, backend, transport, "
                      "placement, max_seq, prompt_ids, max_new, numerics, devices, log_dir, "
                      "dump_boundary, drafter, spec_depth, spec_costs, profile_ops, cuda_graphs, stop_ids, "
                      "cuda_pdl, liveness_timeout_s, "
                      "weights, preset, trunk_layers, experts, weights_seed, share_layers, prompt, "
                      "prompt_file, chat, system, thinking, stop, ignore_eos, temperature, top_k, "
                      "top_p, min_p, seed, max_prompt, prefill_chunk)"));
  }
  return c;
}

RunConfig load_run_config(const std::string& path) {
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path))
    throw Error(cat("--config ", path, ": cannot open the run config (not a readable file)"));
  std::stringstream text;
  text << in.rdbuf();
  const auto base = std::filesystem::absolute(path).parent_path().string();
  return parse_run_config(text.str(), path, base);
}

void check_run_config(const RunConfig& c) {
  if (c.model.empty() && !c.synthetic)
    throw Error("model: no checkpoint directory (set model: or --model, or weights: synthetic)");
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
  if (!c.prompt.empty() && !c.prompt_ids.empty())
    throw Error("prompt and prompt_ids: give one (a text prompt or token ids, not both)");
  check_sampling(c.sampling, "");
}

std::string read_prompt_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat(what, " ", path, ": cannot open the prompt file"));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) throw Error(cat(what, " ", path, ": the prompt file is empty"));
  return text.str();
}

std::string spec_depth_name(int spec_depth) {
  return spec_depth == RunConfig::kSpecDepthAuto ? "auto" : std::to_string(spec_depth);
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
      throw Error(cat(what, ": '", item, "' is not a token id (expected e.g. 1,2,3)"));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw Error(cat(what, ": empty list of token ids"));
  return ids;
}

}  // namespace dsv4
