#include "launcher/startup_agreement.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "comm/mpi_endpoint.h"
#include "base/error.h"
#include "model/presets.h"

namespace dsv4 {

namespace {
constexpr size_t kShownBytes = 64;  // longer values are compared (and shown) as a digest

// FNV-1a, 64 bit: detects accidental differences (not an adversary's).
uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

std::string shown(const std::string& value) {
  if (value.size() <= kShownBytes && value.find('\n') == std::string::npos) return value;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(fnv1a64(value)));
  return cat("fnv1a-64 ", hex, " of ", value.size(), " bytes");
}

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

template <class T>
std::string list(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += cat(i ? "," : "", v[i]);
  return s + "]";
}

std::string numerics_text(const Numerics& n) {
  return cat("kv_quant ", n.kv_quant == KvQuant::e4m3 ? "e4m3" : "clamp", ", expert_arm ",
             n.expert_arm == ExpertArm::bf16 ? "bf16" : "native", ", dense_act ",
             n.dense_act == DenseAct::f32 ? "f32" : "bf16", ", indexer_quant ",
             n.indexer_quant == IndexerQuant::none ? "none" : "fp4");
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += cat(i ? ", " : "", ranks[i]);
  return s;
}
}  // namespace

std::vector<AgreementItem> agreement_items(const RunConfig& c, const Checkpoint& ckpt,
                                           const std::vector<LayerRange>& placement) {
  std::string weight_map;  // the index as the engine reads it: tensor -> shard
  for (const std::string& name : ckpt.names()) weight_map += name + "\t" + ckpt.shard_of(name) + "\n";
  std::string ranges;
  for (const LayerRange& r : placement) ranges += cat(ranges.empty() ? "" : " ", "[", r.begin, ",", r.end, ")");
  const ModelConfig& mc = ckpt.config();
  std::vector<AgreementItem> items = {
      {"checkpoint config.json", ckpt.synthetic() ? model_config_json(mc)
                                                  : file_bytes(std::filesystem::path(ckpt.dir()) / "config.json")},
      {"weights", c.synthetic ? cat("synthetic, preset ", c.synthetic->preset, ", trunk_layers ",
                                    c.synthetic->trunk_layers, ", experts ", (c.synthetic->experts == ExpertRecipe::nvfp4 ? "nvfp4" : "mxfp4"),
                                    ", seed ", c.synthetic->seed, ", share_layers ", c.synthetic->share_layers)
                              : std::string("checkpoint")},
      {"checkpoint weight map", weight_map},
      {"backend", c.backend ? backend_name(*c.backend) : "default"},
      {"transport", transport_name(c.effective_transport())},
      {"placement", ranges},
      {"max_seq", cat(c.effective_max_seq(mc.max_position_embeddings))},
      {"numerics", numerics_text(c.numerics)},
      {"prompt_ids", list(c.prompt_ids)},
      {"max_new", cat(c.max_new)},
      {"prefill_chunk", cat(c.prefill_chunk)},
      {"drafter", c.drafter},
      {"spec_depth", spec_depth_name(c.spec_depth)},
      {"stop_ids", list(c.stop_ids)},
      {"profile_ops", c.profile_ops ? "true" : "false"}};
  for (AgreementItem& item : items) item.value = shown(item.value);
  return items;
}

std::string encode_items(const std::vector<AgreementItem>& items) {
  std::string out;
  for (const AgreementItem& item : items) out += item.name + "=" + item.value + "\n";
  return out;
}

std::vector<AgreementItem> decode_items(const std::string& text) {
  std::vector<AgreementItem> items;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    items.push_back({line.substr(0, eq), line.substr(eq + 1)});
  }
  return items;
}

std::string find_disagreement(const std::vector<std::vector<AgreementItem>>& per_rank) {
  if (per_rank.empty()) return "";
  const auto& first = per_rank[0];
  for (size_t i = 0; i < first.size(); ++i) {
    std::map<std::string, std::vector<int>> holders;  // value -> ranks, rank 0's first
    std::vector<std::string> order;
    for (size_t r = 0; r < per_rank.size(); ++r) {
      const auto& items = per_rank[r];
      const std::string value = i < items.size() && items[i].name == first[i].name
                                    ? items[i].value
                                    : "(not stated: a different dsv4-stage build?)";
      if (!holders.count(value)) order.push_back(value);
      holders[value].push_back(static_cast<int>(r));
    }
    if (order.size() == 1) continue;
    std::string text = cat("start-up agreement: ranks disagree on ", first[i].name, ":");
    for (size_t k = 0; k < order.size(); ++k) {
      const auto& ranks = holders[order[k]];
      text += cat(k ? ";" : "", " ", ranks_text(ranks), ranks.size() == 1 ? " has " : " have ",
                  order[k]);
    }
    return text + " (every rank must run the same run config, checkpoint, numerics and placement)";
  }
  return "";
}

std::string startup_disagreement(MpiEndpoint& ep, const std::vector<AgreementItem>& mine) {
  constexpr size_t kMaxItemsBytes = 1 << 16;  // values are at most a digest long
  std::vector<std::vector<AgreementItem>> per_rank;
  for (const std::string& text : ep.allgather_text(encode_items(mine), kMaxItemsBytes))
    per_rank.push_back(decode_items(text));
  return find_disagreement(per_rank);
}

}  // namespace dsv4
