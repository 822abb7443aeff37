// Stage-test helpers for the drafter: a trunk pipeline with taps plus the DSpark drafter,
// driven as the round loop drives them (prefill + prime, plain steps with a ring row per
// position, verify rounds with commit-time ring rows).
#pragma once
#include <algorithm>
#include <vector>

#include "stage/drafter.h"
#include "stage_harness.h"

namespace dsv4::test {

inline constexpr int64_t kMaxSeq = 64;

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
  // Prefill + prime (R-D5); returns the prefill argmax of the last prompt row.
  int32_t start(const std::vector<int32_t>& prompt) {
    const std::vector<float> logits = pipe.prefill(prompt);
    const int p0 = static_cast<int>(prompt.size());
    drafter.prime(tap_rows(std::min(p0, cfg.sliding_window)), p0);
    int32_t t = 0;
    ops.argmax(logits.data() + static_cast<int64_t>(p0 - 1) * cfg.vocab_size, 1, cfg.vocab_size, &t);
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

inline bool same_proposal(const Proposal& a, const Proposal& b) {
  return a.out_ids == b.out_ids && a.confidence.size() == b.confidence.size() &&
         same_bits(a.confidence.data(), b.confidence.data(), a.confidence.size());
}

}  // namespace dsv4::test
