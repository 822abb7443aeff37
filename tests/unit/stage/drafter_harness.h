// Stage-test helpers for the drafter: a trunk pipeline with taps plus the DSpark drafter on
// its head rank, driven as the round loop drives them (prefill + prime, plain steps with
// a ring row per position, verify rounds with commit-time ring rows).
#pragma once
#include <algorithm>
#include <cmath>
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

// A trunk pipeline with taps (one stage unless `ranges` split it) plus the DSpark drafter;
// the head rank's drafter is `proposer` when given (a replay drafter), else the DSpark
// drafter.
struct DraftRun {
  DraftRun(Checkpoint& ckpt, Ops& o, const std::vector<LayerRange>& ranges = {},
           Drafter* proposer = nullptr)
      : ops(o),
        cfg(ckpt.config()),
        drafter(ckpt, o, Numerics{}, kMaxSeq),
        pipe(ckpt, o, ranges.empty() ? std::vector<LayerRange>{{0, cfg.num_hidden_layers}} : ranges,
             kMaxSeq, true, proposer ? proposer : &drafter),
        tap_width(cfg.dspark.target_layer_ids.size() * cfg.hidden_size),
        taps(o.alloc(static_cast<size_t>(cfg.sliding_window) * tap_width)) {}

  // Backend copy of the last operation's first `rows` tap rows.
  const float* tap_rows(int rows) {
    const std::vector<float> host = pipe.taps(rows);
    ops.upload(taps.data(), host.data(), host.size());
    return taps.data();
  }
  // Prefill (the head primes its drafter, R-D5); returns the token of the last prompt
  // row (its argmax or pick).
  int32_t start(const std::vector<int32_t>& prompt, const RowToken& pick = {}) {
    const auto p0 = static_cast<int64_t>(prompt.size());
    return token(pipe.execute(OpKind::prefill, prompt, static_cast<bool>(pick)), 0, p0, pick);
  }
  // The token of row `row` of a result: the head's argmax, or pick of the row's logits.
  int32_t token(const OpResult& r, size_t row, int64_t position, const RowToken& pick) const {
    return pick ? pick(r.logits.data() + row * cfg.vocab_size, position) : r.ids.at(row);
  }
  // Plain decode of one token, then its ring row in the DSpark drafter (the R-S7
  // reference run: plain decoding writes no ring row itself).
  void plain_step(int32_t token) {
    const int64_t p = pipe.last().pos();
    pipe.execute(OpKind::decode, {token}, false);
    drafter.write_rings(tap_rows(1), p, 1);
  }
  // A verify round of x, commit n (the head writes the ring rows of the committed positions).
  void round(const std::vector<int32_t>& x, int n) {
    pipe.verify(x);
    pipe.commit(n);
  }
  void scribble_transient(float value) {
    for (int k = 0; k < drafter.blocks(); ++k)
      ops.fill(drafter.ring(k).trans_row(0), value,
               static_cast<size_t>(drafter.block_size()) * cfg.head_dim);
  }

  Ops& ops;
  const ModelConfig& cfg;
  DsparkDrafter drafter;
  InProcessRun pipe;
  size_t tap_width;
  FBuf taps;
};

// The engine of one sequence through a DraftRun's pipelines, the round messages of
// ARCHITECTURE.md "A speculative round as messages": propose asks the head's drafter,
// verify returns each row's token (the head's argmax, or `pick` of the row's logits),
// commit keeps n rows on every stage.
class LocalEngine final : public SpecEngine {
 public:
  explicit LocalEngine(DraftRun& run, RowToken pick = {}) : run_(run), pick_(std::move(pick)) {}
  Proposal propose(int32_t head, int64_t anchor) override {
    ++proposals;
    OpHeader h;
    h.kind = OpKind::propose;
    h.pos = anchor + 1;
    h.ids = {head};
    OpResult r = run_.pipe.execute(h);
    Proposal p;
    p.out_ids = std::move(r.ids);
    p.confidence = std::move(r.scores);
    p.nan = std::any_of(p.confidence.begin(), p.confidence.end(),
                        [](float v) { return std::isnan(v); });
    return p;
  }
  std::vector<int32_t> verify(const std::vector<int32_t>& x) override {
    const int64_t m0 = run_.pipe.last().pos();
    const OpResult r = run_.pipe.execute(OpKind::verify, x, static_cast<bool>(pick_));
    std::vector<int32_t> a(x.size());
    for (size_t i = 0; i < x.size(); ++i)  // row i: the token for position m0 + i + 1
      a[i] = run_.token(r, i, m0 + static_cast<int64_t>(i) + 1, pick_);
    return a;
  }
  void commit(int n) override { run_.pipe.commit(n); }
  size_t proposals = 0;

 private:
  DraftRun& run_;
  RowToken pick_;
};

// Plain decoding (§6.1): the prefill's token, then n_new - 1 single-row decode steps, each
// row's token its argmax (greedy) or `pick`.
inline std::vector<int32_t> plain_stream(DraftRun& run, const std::vector<int32_t>& prompt,
                                         int64_t n_new, const RowToken& pick = {}) {
  std::vector<int32_t> out{run.start(prompt, pick)};
  while (static_cast<int64_t>(out.size()) < n_new) {
    const int64_t position = run.pipe.last().pos() + 1;
    const OpResult r = run.pipe.execute(OpKind::decode, {out.back()}, static_cast<bool>(pick));
    out.push_back(run.token(r, 0, position, pick));
  }
  return out;
}

inline bool same_proposal(const Proposal& a, const Proposal& b) {
  return a.out_ids == b.out_ids && a.confidence.size() == b.confidence.size() &&
         same_bits(a.confidence.data(), b.confidence.data(), a.confidence.size());
}

}  // namespace dsv4::test
