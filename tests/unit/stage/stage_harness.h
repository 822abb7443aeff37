// Shared helpers of the stage tests: the tiny fixture checkpoint, the CPU backend, and
// a single- or multi-stage run of the real Pipeline that returns host logits.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/ops.h"
#include "model/checkpoint.h"
#include "stage/pipeline.h"
#include "stage/stage.h"
#include "tests/unit/stage/in_process_planes.h"

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
                            bool drafter, int64_t prefill_chunk = 0) {
  StageSpec s;
  s.rank = rank;
  s.n_ranks = n_ranks;
  s.layers = layers;
  s.max_seq = max_seq;
  s.drafter = drafter;
  s.prefill_chunk = prefill_chunk;
  return s;
}

// The stages of a pipeline in one process over one checkpoint and one backend, each
// rank driven by its real Pipeline (stage/pipeline.h): a single rank alone, more ranks
// joined by the in-process planes. Each operation runs as the Coordinator runs it (the
// header to every rank, then rank 0's part), then every other rank's part, so every
// stage holds its state after the operation. The head's rows of the last operation are
// kept for the tests: every row's logits (a prefill scores only its last row) and the
// tap rows.
class InProcessRun {
 public:
  // head_drafter: the head rank's drafter (proposals, primed rings, commit-time ring rows);
  // `drafter` alone gives the stages their tap rows. prefill_chunk: StageSpec's.
  InProcessRun(Checkpoint& ckpt, Ops& ops, const std::vector<LayerRange>& ranges,
               int64_t max_seq, bool drafter, Drafter* head_drafter = nullptr,
               int64_t prefill_chunk = 0)
      : ops_(ops), cfg_(ckpt.config()) {
    const int n = static_cast<int>(ranges.size());
    for (int r = 0; r < n; ++r)
      stages_.push_back(std::make_unique<Stage>(
          ckpt, ops,
          stage_spec(r, n, ranges[static_cast<size_t>(r)], max_seq, drafter, prefill_chunk)));
    if (n > 1) planes_ = std::make_unique<InProcessPlanes>(ops, n);
    for (int r = 0; r < n; ++r) {
      PipelineHooks hooks;
      if (r == n - 1)
        hooks.head_rows = [this](const OpHeader& h, const BoundaryPayload& p) { keep(h, p); };
      pipelines_.push_back(std::make_unique<Pipeline>(
          *stages_[static_cast<size_t>(r)], ops, cfg_, planes_ ? &planes_->control(r) : nullptr,
          planes_ ? &planes_->data(r) : nullptr, std::move(hooks),
          r == n - 1 ? head_drafter : nullptr));
      if (r > 0) planes_->attach(r, [p = pipelines_.back().get()](const OpHeader& h) { p->execute(h); });
    }
  }

  Stage& stage(size_t i) { return *stages_.at(i); }
  // Rank 0's pipeline and control plane (null with one rank), for a Coordinator.
  Pipeline& front() { return *pipelines_.front(); }
  ControlPlane* control() { return planes_ ? &planes_->control(0) : nullptr; }
  Stage& last() { return *stages_.back(); }

  // One operation on every rank; rank 0's result (the head's argmax, logits when asked).
  OpResult execute(const OpHeader& header) {
    if (planes_) planes_->control(0).send_header(header);
    OpResult result = pipelines_.front()->execute(header);
    if (planes_) planes_->run_pending();
    return result;
  }
  // An operation at the head stage's position (a proposal's is its anchor + 1).
  OpResult execute(OpKind kind, std::vector<int32_t> ids, bool want_logits, int count = 0) {
    OpHeader h;
    h.kind = kind;
    h.pos = kind == OpKind::prefill ? 0 : last().pos();
    h.ids = std::move(ids);
    h.count = count;
    h.want_logits = want_logits;
    return execute(h);
  }

  // Logits [n, V] of every prompt row.
  std::vector<float> prefill(const std::vector<int32_t>& ids) {
    execute(OpKind::prefill, ids, false);
    return head_logits(static_cast<int>(ids.size()));
  }
  // A prompt in operations of `chunk` rows, as the Coordinator sends it (issue 13): the
  // logits [V] of its last row.
  std::vector<float> prefill_chunks(const std::vector<int32_t>& ids, int64_t chunk) {
    const auto n = static_cast<int64_t>(ids.size());
    OpResult last;
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
      const int64_t c1 = std::min(n, c0 + chunk);
      OpHeader h;
      h.kind = OpKind::prefill;
      h.pos = c0;
      h.ids.assign(ids.begin() + c0, ids.begin() + c1);
      h.last_chunk = h.want_logits = c1 == n;
      last = execute(h);
    }
    return last.logits;
  }
  // Logits [V] of one decode step.
  std::vector<float> decode(int32_t token) {
    return execute(OpKind::decode, {token}, true).logits;
  }
  // Logits [T, V] of a verify round (left open).
  std::vector<float> verify(const std::vector<int32_t>& ids) {
    return execute(OpKind::verify, ids, true).logits;
  }
  void commit(int n) { execute(OpKind::commit, {}, false, n); }
  void reset() { execute(OpKind::reset, {}, false); }
  // Host copy of the last operation's tap rows [rows, n_targets, H] at the head.
  std::vector<float> taps(int rows) const {
    const size_t n = static_cast<size_t>(rows) * cfg_.dspark.target_layer_ids.size() *
                     cfg_.hidden_size;
    DSV4_CHECK(n <= head_taps_.size(), "the head kept ", head_taps_.size(), " tap floats");
    return {head_taps_.begin(), head_taps_.begin() + static_cast<ptrdiff_t>(n)};
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
  void keep(const OpHeader&, const BoundaryPayload& p) {
    head_h_ = ops_.alloc(p.h_floats);
    ops_.copy(head_h_.data(), p.h, p.h_floats);
    head_taps_.assign(p.tap_floats, 0.0f);
    if (p.taps) ops_.download(head_taps_.data(), p.taps, p.tap_floats);
  }
  // The head's logits of the first `rows` rows it kept.
  std::vector<float> head_logits(int rows) {
    FBuf logits = ops_.alloc(static_cast<size_t>(rows) * cfg_.vocab_size);
    last().head_logits(head_h_.data(), rows, logits.data());
    std::vector<float> out(logits.size());
    ops_.download(out.data(), logits.data(), out.size());
    return out;
  }

  Ops& ops_;
  const ModelConfig& cfg_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::unique_ptr<InProcessPlanes> planes_;  // more than one rank
  std::vector<std::unique_ptr<Pipeline>> pipelines_;
  FBuf head_h_;                   // the head's h of the last operation with rows
  std::vector<float> head_taps_;  // its tap rows (host)
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
