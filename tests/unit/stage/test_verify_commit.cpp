// SPECDECODE.md §7 gates on the CPU backend: G2 (verify of T rows equals T plain decode
// steps, logits and taps bitwise), G3 (after commit(n) every live cache class equals n
// plain steps bitwise; one more round from both states agrees), G11 (protocol refusals).
#include <doctest/doctest.h>

#include <algorithm>

#include "stage_harness.h"
#include "verify_commit_walk.h"

using namespace dsv4;
using namespace dsv4::test;

TEST_CASE("G2/G3: verify equals T plain steps and commit(n) equals n plain steps (R-V2, R-S6)") {
  auto ops = make_cpu_ops();
  MESSAGE("verify/commit rounds checked: " << verify_commit_walk(*ops));
}

TEST_CASE("G11: verify/commit protocol refusals name the cause (R-S9)") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  InProcessRun p(ckpt, *ops, {{0, 7}}, 16, true);
  Stage& s = p.stage(0);
  FBuf h = ops->alloc(16 * c.hc_mult * c.hidden_size);
  FBuf taps = ops->alloc(16 * c.dspark.target_layer_ids.size() * c.hidden_size);
  float* hp = h.data();
  float* tp = taps.data();

  CHECK_THROWS_WITH_AS(s.verify({1}, hp, tp), doctest::Contains("no prefill"), Error);
  CHECK_THROWS_WITH_AS(s.commit(1), doctest::Contains("no verify round is open"), Error);
  s.prefill({5, 6, 7}, hp, tp);
  CHECK_THROWS_WITH_AS(s.verify({}, hp, tp), doctest::Contains("T = 0 outside [1, tmax 6]"),
                       Error);
  CHECK_THROWS_WITH_AS(s.verify(std::vector<int32_t>(7, 1), hp, tp),
                       doctest::Contains("T = 7 outside [1, tmax 6]"), Error);
  s.verify({1, 2, 3}, hp, tp);
  CHECK_THROWS_WITH_AS(s.verify({1}, hp, tp), doctest::Contains("round is open"), Error);
  CHECK_THROWS_WITH_AS(s.decode(1, hp, tp), doctest::Contains("round is open"), Error);
  CHECK_THROWS_WITH_AS(s.prefill({1}, hp, tp), doctest::Contains("round is open"), Error);
  CHECK_THROWS_WITH_AS(s.commit(0), doctest::Contains("n = 0 outside [1, T = 3]"), Error);
  CHECK_THROWS_WITH_AS(s.commit(4), doctest::Contains("n = 4 outside [1, T = 3]"), Error);
  s.commit(2);
  CHECK(s.pos() == 5);
  for (int i = 0; i < 6; ++i) s.decode(1, hp, tp);  // pos 11
  CHECK_THROWS_WITH_AS(s.verify(std::vector<int32_t>(6, 1), hp, tp),
                       doctest::Contains("positions 11 + T 6 exceed max_seq 16"), Error);
}
