// Generated cache contents for the decode benchmark (Stage::fill_for_benchmark): a
// context of any length without its prefill (issue 11 allows filling caches with
// generated content to reach a position).
#include <vector>

#include "base/error.h"
#include "model/synthetic_values.h"
#include "stage/stage_impl.h"

namespace dsv4 {

namespace {

// Seeded values in [-1, 1) (the synthetic weights' counter-based stream).
void upload_seeded(Ops& ops, float* dst, size_t n, uint64_t state) {
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = synth::master_at(state, i, -1.0, 1.0);
  if (n > 0) ops.upload(dst, host.data(), n);
}

}  // namespace

void CompressorState::fill_for_benchmark(Ops& ops, int64_t pos, uint64_t seed) {
  const size_t pend = static_cast<size_t>(slots_) * latent_;
  upload_seeded(ops, pend_kv_.data(), pend, seed ^ 0x6b76u);
  upload_seeded(ops, pend_score_.data(), pend, seed ^ 0x73636fu);
  blocks_ = blocks0_ = static_cast<int>(pos / ratio_);
}

void LayerCache::fill_for_benchmark(Ops& ops, int64_t pos, uint64_t seed) {
  if (attn && pos / attn->weights().ratio > cap_blocks)
    throw Error(cat("fill_for_benchmark: position ", pos, " past the store of ", cap_blocks, " blocks"));
  upload_seeded(ops, kvc.data(), static_cast<size_t>(window + cap_blocks) * head_dim, seed);
  if (ikvc.data()) upload_seeded(ops, ikvc.data(), ikvc.size(), seed ^ 0x696bu);
  if (attn) attn->fill_for_benchmark(ops, pos, seed ^ 0x61u);
  if (index) index->fill_for_benchmark(ops, pos, seed ^ 0x69u);
}

void Stage::fill_for_benchmark(int64_t pos, uint64_t seed) {
  Impl& m = *impl_;
  m.check_no_round("fill_for_benchmark");
  if (pos < 1 || pos >= spec_.max_seq)
    throw Error(cat("fill_for_benchmark: position ", pos, " outside [1, max_seq ", spec_.max_seq, ")"));
  for (size_t i = 0; i < m.layers.size(); ++i)
    m.layers[i]->fill_for_benchmark(m.ops, pos, seed + 0x9E37u * (i + 1));
  m.ops.synchronize();
  m.pos = pos;
}

}  // namespace dsv4
