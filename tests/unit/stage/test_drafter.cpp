// SPECDECODE.md §2 DSpark drafter on the CPU backend and the tiny fixture (W = 16, B = 5):
// G5 / R-S8 (a proposal is deterministic and changes no trunk class and no persistent
// ring row), G4 (NaN in the transient draft rows is inert), the §2.6 attention set (ring
// slots past the anchor are never read), R-S7 at the component level (rings written
// round by round at commit equal rings written after every plain decode step), and the
// drafter's protocol refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "drafter_harness.h"
#include "stage/attention_index.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("draft_index: ring slots in slot order, then every transient row (SPECDECODE §2.6)") {
  std::vector<int32_t> idx;
  const MergedIndex m = draft_index(3, 2, 16, idx);
  CHECK(m.width == 5);
  CHECK(m.tail_width == 0);
  CHECK(idx == std::vector<int32_t>{0, 1, 2, 16, 17, 0, 1, 2, 16, 17});  // no causal mask
}

TEST_CASE("G5/G4: a proposal is deterministic, side-effect free and ignores dead rows (R-S8)") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  DraftRun run(ckpt, *ops);
  const ModelConfig& c = run.cfg;
  const int B = c.dspark.block_size;
  // p0 = 3: the ring is partly filled; p0 = 40: it has wrapped inside the prompt.
  for (int p0 : {3, 40}) {
    CAPTURE(p0);
    const int32_t t = run.start(random_tokens(p0, c.vocab_size, 7 + p0));
    const std::vector<CacheClass> trunk0 = run.pipe.cache_classes(true);
    const std::vector<CacheClass> ring0 = run.drafter.ring_classes();

    const Proposal a = run.drafter.propose(t, p0 - 1);
    REQUIRE(a.out_ids.size() == static_cast<size_t>(B + 1));
    REQUIRE(a.confidence.size() == static_cast<size_t>(B));
    CHECK_FALSE(a.nan);
    CHECK(a.out_ids[0] == t);
    for (int j = 1; j <= B; ++j) CHECK((a.out_ids[j] >= 0 && a.out_ids[j] < c.vocab_size));
    for (float v : a.confidence) CHECK(std::isfinite(v));

    const Proposal b = run.drafter.propose(t, p0 - 1);
    CHECK(same_proposal(a, b));
    CHECK(first_cache_difference(run.pipe.cache_classes(true), trunk0) == "");
    CHECK(first_cache_difference(run.drafter.ring_classes(), ring0) == "");

    // G4: NaN in every block's transient rows before a proposal changes nothing.
    run.scribble_transient(kNaN);
    CHECK(same_proposal(run.drafter.propose(t, p0 - 1), a));

    // §2.6 step 4: the attention set is ring slots [0, min(W, p0)); with p0 < W the
    // slots past the anchor are never read.
    if (p0 < c.sliding_window) {
      for (int k = 0; k < run.drafter.blocks(); ++k) {
        const LayerCache& ring = run.drafter.ring(k);
        ops->fill(ring.ring_row(p0), kNaN, static_cast<size_t>(c.sliding_window - p0) * c.head_dim);
      }
      CHECK(same_proposal(run.drafter.propose(t, p0 - 1), a));
    }
    // The proposal depends on the head token (row 0 is the only non-noise row).
    const Proposal other = run.drafter.propose((t + 1) % static_cast<int32_t>(c.vocab_size), p0 - 1);
    CHECK_FALSE(same_bits(other.confidence.data(), a.confidence.data(), B));
    run.pipe.reset();  // the sequence is done (every stage and the drafter)
  }
}

TEST_CASE("R-D5: the prime writes slots of positions max(0, p0-W)..p0-1 only") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  DraftRun run(ckpt, *ops);
  const ModelConfig& c = run.cfg;
  const int p0 = 5, D = c.head_dim;
  run.start(random_tokens(p0, c.vocab_size, 3));
  CHECK(run.drafter.ring_pos() == p0);
  for (const CacheClass& k : run.drafter.ring_classes()) {
    std::vector<float> rows(k.bytes.size() / sizeof(float));
    std::memcpy(rows.data(), k.bytes.data(), k.bytes.size());
    CAPTURE(k.name);
    for (int s = 0; s < c.sliding_window; ++s) {
      double sq = 0;
      for (int d = 0; d < D; ++d) sq += static_cast<double>(rows[s * D + d]) * rows[s * D + d];
      CHECK((s < p0) == (sq > 0));  // written slots hold a normed row; the rest stay 0
    }
  }
}

TEST_CASE("G7 / R-S7 (component): commit-time ring writes equal per-step ring writes") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const int tmax = c.dspark.block_size + 1;
  const std::vector<int32_t> stream = random_tokens(static_cast<int>(kMaxSeq), c.vocab_size, 21);
  for (int p0 : {2, 20}) {  // shorter and longer than W = 16; runs wrap the ring
    CAPTURE(p0);
    const std::vector<int32_t> prompt(stream.begin(), stream.begin() + p0);
    DraftRun spec(ckpt, *ops), plain(ckpt, *ops);
    spec.start(prompt);
    plain.start(prompt);
    CHECK(first_cache_difference(spec.drafter.ring_classes(), plain.drafter.ring_classes()) == "");
    int64_t pos = p0;
    for (int r = 0; pos + tmax <= kMaxSeq; ++r) {
      const int T = 1 + r % tmax, n = 1 + (r * 7) % T;  // every T, commits 1..T
      CAPTURE(r);
      const std::vector<int32_t> x(stream.begin() + pos, stream.begin() + pos + T);
      spec.round(x, n);
      for (int i = 0; i < n; ++i) plain.plain_step(x[i]);
      pos += n;
      REQUIRE(spec.drafter.ring_pos() == pos);
      CHECK(first_cache_difference(spec.drafter.ring_classes(), plain.drafter.ring_classes()) == "");
      const int32_t head = stream[pos];
      CHECK(same_proposal(spec.drafter.propose(head, pos - 1), plain.drafter.propose(head, pos - 1)));
    }
    CHECK(pos > 2 * c.sliding_window);
  }
}

TEST_CASE("drafter protocol refusals name the cause") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  DraftRun run(ckpt, *ops);
  const ModelConfig& c = run.cfg;
  CHECK_THROWS_WITH_AS(run.drafter.propose(1, 0), doctest::Contains("never primed"), Error);
  run.start(random_tokens(6, c.vocab_size, 5));
  CHECK_THROWS_WITH_AS(run.drafter.propose(1, 4), doctest::Contains("anchor 4"), Error);
  CHECK_THROWS_WITH_AS(run.drafter.propose(static_cast<int32_t>(c.vocab_size), 5),
                       doctest::Contains("head token"), Error);
  CHECK_THROWS_WITH_AS(run.drafter.write_rings(run.taps.data(), 7, 1),
                       doctest::Contains("first position 7"), Error);
}
