// SPECDECODE.md §7 G2/G3 as one walk over a backend (the CPU test and the CUDA test run
// the same walk): verify of T rows equals T plain decode steps (logits and taps bitwise),
// and after commit(n) every cache class equals n plain steps bitwise.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>

#include "tests/unit/stage/stage_harness.h"

namespace dsv4::test {

// One walk per T over every position of a max_seq = 64 sequence, so that the rounds hit
// the §7 boundary set of the tiny preset (W = 16, ratios 4 and 16, index_topk 8): first
// blocks, every residue mod 4 and mod 16 at every row of a round, window fill and wrap,
// the indexer top-k crossing (position 32) and max_seq - T. Each round: verify(x[0..T)),
// the plain side decodes x[0..n) (G2 on those rows, all T when n == T), commit(n), then
// every cache class is compared whole (G3); the next round is the "one more round from
// both states". n cycles through 1..T, so boundaries fall before, at and after the commit.
inline int verify_commit_walk(Ops& ops) {
  constexpr int64_t kMaxSeq = 64;
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  const int64_t V = c.vocab_size;
  const size_t tap_row = c.dspark.target_layer_ids.size() * c.hidden_size;
  const int tmax = c.dspark.block_size + 1;
  const std::vector<int32_t> ids = random_tokens(static_cast<int>(kMaxSeq), V, 99);

  int rounds = 0;
  for (int T = 1; T <= tmax; ++T) {
    InProcessRun spec(ckpt, ops, {{0, 7}}, kMaxSeq, true);
    InProcessRun plain(ckpt, ops, {{0, 7}}, kMaxSeq, true);
    const int prompt = 1 + T % 3;  // walks start at pos0 1, 2 and 3
    spec.prefill({ids.begin(), ids.begin() + prompt});
    plain.prefill({ids.begin(), ids.begin() + prompt});
    CHECK(first_cache_difference(spec.cache_classes(true), plain.cache_classes(true)) == "");
    std::vector<float> last = plain.decode(ids[prompt]);  // anchor logits for greedy drafts
    spec.decode(ids[prompt]);
    for (int k = 0; spec.stage(0).pos() < kMaxSeq; ++k) {
      const int64_t pos0 = spec.stage(0).pos();
      const int t = static_cast<int>(std::min<int64_t>(T, kMaxSeq - pos0));
      const int n = 1 + k % t;
      CAPTURE(T);
      CAPTURE(pos0);
      CAPTURE(n);
      // x[0] is the plain greedy token (a round head); the drafts x[1..] are random ids.
      std::vector<int32_t> x(ids.begin() + pos0, ids.begin() + pos0 + t);
      x[0] = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      const std::vector<float> vl = spec.verify(x);
      const std::vector<float> vt = spec.taps(t);
      for (int i = 0; i < n; ++i) {
        last = plain.decode(x[i]);
        const std::vector<float> pt = plain.taps(1);
        CAPTURE(i);
        CHECK(same_bits(vl.data() + i * V, last.data(), V));
        CHECK(same_bits(vt.data() + i * tap_row, pt.data(), tap_row));
      }
      spec.commit(n);
      CHECK(spec.stage(0).pos() == pos0 + n);
      CHECK(first_cache_difference(spec.cache_classes(true), plain.cache_classes(true)) == "");
      ++rounds;
    }
  }
  return rounds;
}

}  // namespace dsv4::test
