#include "model/step_bytes.h"

#include <algorithm>
#include <string>

namespace dsv4 {

namespace {

// "layers.l.ffn.experts.e.w1.weight" -> e; -1 for a tensor outside the routed experts.
int64_t expert_index(const std::string& name) {
  static const std::string kTag = ".ffn.experts.";
  const size_t at = name.find(kTag);
  if (at == std::string::npos) return -1;
  return std::stoll(name.substr(at + kTag.size()));
}

}  // namespace

uint64_t step_read_bytes(const CensusEntry& e, const ModelConfig& c) {
  if (e.cls == ByteClass::embed) return e.bytes() / static_cast<uint64_t>(c.vocab_size);  // one row
  if (e.name.ends_with(".ffn.gate.tid2eid")) return e.bytes() / static_cast<uint64_t>(c.vocab_size);
  const int64_t expert = expert_index(e.name);
  if (expert >= c.num_experts_per_tok) return 0;  // K experts read; all are the same size
  return e.bytes();
}

std::map<ByteClass, uint64_t> step_weight_bytes(const ModelConfig& c, ExpertRecipe trunk_experts) {
  CensusOptions co;
  co.trunk_experts = trunk_experts;
  co.drafter_blocks = 0;         // a decode step never reads the drafter
  co.nvfp4_input_scale = false;  // stored but ignored on load (C3): never read
  std::map<ByteClass, uint64_t> by_class;
  for (const CensusEntry& e : tensor_census(c, co)) by_class[e.cls] += step_read_bytes(e, c);
  return by_class;
}

ContextBytes step_context_bytes(const ModelConfig& c, int64_t pos) {
  constexpr uint64_t kF32 = 4;
  ContextBytes b;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    b.ring += static_cast<uint64_t>(std::min<int64_t>(pos, c.sliding_window)) * c.head_dim * kF32;
    const int r = c.ratio(l);
    if (r == 0) continue;
    const int64_t blocks = pos / r;
    const int64_t read = r == 4 ? std::min<int64_t>(blocks, c.index_topk) : blocks;
    b.compressed += static_cast<uint64_t>(read) * c.head_dim * kF32;
    if (r == 4) b.indexer_keys += static_cast<uint64_t>(blocks) * c.index_head_dim * kF32;
  }
  return b;
}

}  // namespace dsv4
