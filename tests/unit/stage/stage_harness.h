// Shared helpers of the stage tests: the tiny fixture checkpoint, the CPU backend, and
// a single- or multi-stage runner that returns host logits.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/checkpoint.h"
#include "base/error.h"
#include "stage/stage.h"

namespace dsv4::test {

inline std::string tiny_dir() { return std::string(DSV4_FIXTURES_DIR) + "/tiny"; }

// Seeded random token ids in [0, vocab).
inline std::vector<int32_t> random_tokens(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = dist(rng);
  return ids;
}

inline StageSpec stage_spec(int rank, int n_ranks, LayerRange layers, int64_t max_seq,
                            bool drafter) {
  StageSpec s;
  s.rank = rank;
  s.n_ranks = n_ranks;
  s.layers = layers;
  s.max_seq = max_seq;
  s.drafter = drafter;
  return s;
}

// A pipeline of stages in one process over one checkpoint and one CPU backend; the
// boundary h (and taps) pass from stage to stage in place, as ARCHITECTURE.md's data
// plane would carry them.
class Pipeline {
 public:
  Pipeline(Checkpoint& ckpt, Ops& ops, const std::vector<LayerRange>& ranges,
           int64_t max_seq, bool drafter)
      : ops_(ops), cfg_(ckpt.config()) {
    for (size_t r = 0; r < ranges.size(); ++r)
      stages_.push_back(std::make_unique<Stage>(
          ckpt, ops, stage_spec(static_cast<int>(r), static_cast<int>(ranges.size()),
                                ranges[r], max_seq, drafter)));
    const size_t rows = static_cast<size_t>(max_seq);
    h_ = ops.alloc(rows * cfg_.hc_mult * cfg_.hidden_size);
    logits_ = ops.alloc(rows * cfg_.vocab_size);
    n_targets_ = drafter ? cfg_.dspark.target_layer_ids.size() : 0;
    if (drafter) taps_ = ops.alloc(rows * n_targets_ * cfg_.hidden_size);
  }

  Stage& stage(size_t i) { return *stages_.at(i); }
  Stage& last() { return *stages_.back(); }

  // Logits [n, V] of every prompt row.
  std::vector<float> prefill(const std::vector<int32_t>& ids) {
    for (auto& s : stages_) s->prefill(ids, h_.data(), taps_.data());
    return logits(static_cast<int>(ids.size()));
  }
  // Logits [V] of one decode step.
  std::vector<float> decode(int32_t token) {
    for (auto& s : stages_) s->decode(token, h_.data(), taps_.data());
    return logits(1);
  }
  // Logits [T, V] of a verify round (left open).
  std::vector<float> verify(const std::vector<int32_t>& ids) {
    for (auto& s : stages_) s->verify(ids, h_.data(), taps_.data());
    return logits(static_cast<int>(ids.size()));
  }
  void commit(int n) {
    for (auto& s : stages_) s->commit(n);
  }
  // Host copy of tap rows [rows, n_targets, H].
  std::vector<float> taps(int rows) const {
    std::vector<float> out(static_cast<size_t>(rows) * n_targets_ * cfg_.hidden_size);
    ops_.download(out.data(), taps_.data(), out.size());
    return out;
  }
  std::vector<CacheClass> cache_classes(bool whole) const {
    std::vector<CacheClass> all;
    for (const auto& s : stages_) {
      auto c = s->cache_classes(whole);
      // every stage reports its pos; the pipeline's layers are compared once each
      if (!all.empty()) std::erase_if(c, [](const CacheClass& k) { return k.name == "pos"; });
      all.insert(all.end(), c.begin(), c.end());
    }
    return all;
  }

 private:
  std::vector<float> logits(int rows) {
    last().head_logits(h_.data(), rows, logits_.data());
    std::vector<float> out(static_cast<size_t>(rows) * cfg_.vocab_size);
    ops_.download(out.data(), logits_.data(), out.size());
    return out;
  }

  Ops& ops_;
  const ModelConfig& cfg_;
  std::vector<std::unique_ptr<Stage>> stages_;
  FBuf h_, logits_, taps_;
  size_t n_targets_ = 0;
};

// Bitwise equality of float rows (memcmp: -0.0 and NaN compare by bits).
inline bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// First differing cache class name, or "" when every class matches bitwise.
inline std::string first_cache_difference(const std::vector<CacheClass>& a,
                                          const std::vector<CacheClass>& b) {
  if (a.size() != b.size()) return "class count";
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].bytes != b[i].bytes) return a[i].name;
  return "";
}

}  // namespace dsv4::test
