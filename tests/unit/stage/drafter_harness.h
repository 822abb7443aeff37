// Stage-test helpers for the drafter: a trunk pipeline with taps plus the DSpark drafter,
// driven as the round loop drives them (prefill + prime, plain steps with a ring row per
// position, verify rounds with commit-time ring rows).
#pragma once
#include <algorithm>
#include <functional>
#include <vector>

#include "stage/drafter.h"
#include "stage/spec_rounds.h"
#include "stage_harness.h"

namespace dsv4::test {

inline constexpr int64_t kMaxSeq = 64;

// The token a logits row [V] emits for `position` (the position the token will take):
// empty = the argmax (greedy); else a sampler's draw (speculative sampling tests).
using RowToken = std::function<int32_t(const float* row, int64_t position)>;

// A trunk pipeline with taps (one stage unless `ranges` split it) plus the drafter.
struct DraftRun {
  DraftRun(Checkpoint& ckpt, Ops& o, const std::vector<LayerRange>& ranges = {})
      : ops(o),
        cfg(ckpt.config()),
        pipe(ckpt, o, ranges.empty() ? std::vector<LayerRange>{{0, cfg.num_hidden_layers}} : ranges,
             kMaxSeq, true),
        drafter(ckpt, o, Numerics{}, kMaxSeq),
        tap_width(cfg.dspark.target_layer_ids.size() * cfg.hidden_size),
        taps(o.alloc(static_cast<size_t>(cfg.sliding_window) * tap_width)) {}

  // Backend copy of the pipeline's first `rows` tap rows.
  const float* tap_rows(int rows) {
    const std::vector<float> host = pipe.taps(rows);
    ops.upload(taps.data(), host.data(), host.size());
    return taps.data();
  }
  // Prefill + prime (R-D5); returns the token of the last prompt row (its argmax or pick).
  int32_t start(const std::vector<int32_t>& prompt, const RowToken& pick = {}) {
    const std::vector<float> logits = pipe.prefill(prompt);
    const int p0 = static_cast<int>(prompt.size());
    drafter.prime(tap_rows(std::min(p0, cfg.sliding_window)), p0);
    return token(logits.data() + static_cast<int64_t>(p0 - 1) * cfg.vocab_size, p0, pick);
  }
  int32_t token(const float* row, int64_t position, const RowToken& pick) {
    if (pick) return pick(row, position);
    int32_t t = 0;
    ops.argmax(row, 1, cfg.vocab_size, &t);
    return t;
  }
  // Plain decode of one token, then its ring row (the R-S7 reference run).
  void plain_step(int32_t token) {
    const int64_t p = pipe.last().pos();
    pipe.decode(token);
    drafter.write_rings(tap_rows(1), p, 1);
  }
  // A verify round of x, commit n, ring rows of the committed positions.
  void round(const std::vector<int32_t>& x, int n) {
    const int64_t m0 = pipe.last().pos();
    pipe.verify(x);
    pipe.commit(n);
    drafter.write_rings(tap_rows(n), m0, n);
  }
  void scribble_transient(float value) {
    for (int k = 0; k < drafter.blocks(); ++k)
      ops.fill(drafter.ring(k).trans_row(0), value,
               static_cast<size_t>(drafter.block_size()) * cfg.head_dim);
  }

  Ops& ops;
  const ModelConfig& cfg;
  Pipeline pipe;
  DsparkDrafter drafter;
  size_t tap_width;
  FBuf taps;
};

// The engine of one sequence in process: verify / commit on every stage of a DraftRun,
// ring rows of committed positions in its DSpark drafter; proposals from `proposer`
// (the DSpark drafter itself, or a replay drafter); each verify row's token by `pick`.
class LocalEngine final : public SpecEngine {
 public:
  LocalEngine(DraftRun& run, Drafter& proposer, RowToken pick = {})
      : run_(run), proposer_(proposer), pick_(std::move(pick)) {}
  Proposal propose(int32_t head, int64_t anchor) override {
    ++proposals;
    return proposer_.propose(head, anchor);
  }
  std::vector<int32_t> verify(const std::vector<int32_t>& x) override {
    m0_ = run_.pipe.last().pos();
    const std::vector<float> logits = run_.pipe.verify(x);
    std::vector<int32_t> a(x.size());
    for (size_t i = 0; i < x.size(); ++i)  // row i: the token for position m0 + i + 1
      a[i] = run_.token(logits.data() + i * run_.cfg.vocab_size, m0_ + static_cast<int64_t>(i) + 1, pick_);
    return a;
  }
  void commit(int n) override {
    run_.pipe.commit(n);
    run_.drafter.write_rings(run_.tap_rows(n), m0_, n);
  }
  size_t proposals = 0;

 private:
  DraftRun& run_;
  Drafter& proposer_;
  RowToken pick_;
  int64_t m0_ = 0;
};

// Plain decoding (§6.1): the prefill's token, then n_new - 1 single-row decode steps, each
// row's token its argmax (greedy) or `pick`.
inline std::vector<int32_t> plain_stream(DraftRun& run, const std::vector<int32_t>& prompt,
                                         int64_t n_new, const RowToken& pick = {}) {
  std::vector<int32_t> out{run.start(prompt, pick)};
  while (static_cast<int64_t>(out.size()) < n_new) {
    const int64_t position = run.pipe.last().pos() + 1;
    const std::vector<float> logits = run.pipe.decode(out.back());
    out.push_back(run.token(logits.data(), position, pick));
  }
  return out;
}

inline bool same_proposal(const Proposal& a, const Proposal& b) {
  return a.out_ids == b.out_ids && a.confidence.size() == b.confidence.size() &&
         same_bits(a.confidence.data(), b.confidence.data(), a.confidence.size());
}

}  // namespace dsv4::test
