// ARCHITECTURE.md law 2 on the CPU backend (row-independent kernels, MODEL.md §6.8 law 5):
// decode step p reproduces prefill row p bit for bit; and the state law of §6.7 item 2.
#include <doctest/doctest.h>

#include "stage_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

constexpr int kPrompt = 5;    // short prompt: blocks of every kind are emitted in decode
constexpr int kTotal = 80;    // W = 16 wraps 5 times, r = 16 emits 5 blocks, r = 4 emits 20 > topk 8
constexpr int64_t kMaxSeq = 96;

}  // namespace

TEST_CASE("decode step p equals prefill row p (law 2)") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const int64_t V = ckpt.config().vocab_size;
  const std::vector<int32_t> ids = random_tokens(kTotal, V, 20240601);

  InProcessRun inc(ckpt, *ops, {{0, 7}}, kMaxSeq, false);
  std::vector<float> got = inc.prefill({ids.begin(), ids.begin() + kPrompt});
  for (int p = kPrompt; p < kTotal; ++p) {
    const std::vector<float> step = inc.decode(ids[p]);
    got.insert(got.end(), step.begin(), step.end());
  }

  InProcessRun full(ckpt, *ops, {{0, 7}}, kMaxSeq, false);
  const std::vector<float> want = full.prefill(ids);
  REQUIRE(got.size() == want.size());
  for (int p = 0; p < kTotal; ++p) {
    INFO("position " << p);
    CHECK(same_bits(got.data() + p * V, want.data() + p * V, V));
  }

  // A fresh prefill's last row equals the long prefill's row (rows are independent of s).
  for (int s : {1, 16, 17, 33, 64}) {
    InProcessRun fresh(ckpt, *ops, {{0, 7}}, kMaxSeq, false);
    const std::vector<float> rows = fresh.prefill({ids.begin(), ids.begin() + s});
    INFO("prefill length " << s);
    CHECK(same_bits(rows.data() + (s - 1) * V, want.data() + (s - 1) * V, V));
  }

  // §6.7 item 2: the live state of prefill(n) + decode(n..m) equals prefill(m).
  CHECK(first_cache_difference(inc.cache_classes(false), full.cache_classes(false)) == "");
  CHECK(inc.stage(0).pos() == kTotal);
}

TEST_CASE("split invariance: stages [0,4) + [4,7) and [0,2) + [2,5) + [5,7) give the logits of one stage bit for bit") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const int64_t V = ckpt.config().vocab_size;
  const std::vector<int32_t> ids = random_tokens(40, V, 77);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 21);

  InProcessRun one(ckpt, *ops, {{0, 7}}, 64, false);
  for (const std::vector<LayerRange>& split :
       {std::vector<LayerRange>{{0, 4}, {4, 7}}, std::vector<LayerRange>{{0, 2}, {2, 5}, {5, 7}}}) {
    CAPTURE(split.size());
    InProcessRun many(ckpt, *ops, split, 64, false);
    const std::vector<float> a = one.prefill(prompt), b = many.prefill(prompt);
    CHECK(a == b);
    CHECK(same_bits(a.data(), b.data(), a.size()));
    for (size_t p = prompt.size(); p < ids.size(); ++p) {
      const std::vector<float> sa = one.decode(ids[p]), sb = many.decode(ids[p]);
      INFO("position " << p);
      CHECK(same_bits(sa.data(), sb.data(), sa.size()));
    }
    CHECK(first_cache_difference(one.cache_classes(true), many.cache_classes(true)) == "");
    one.reset();
  }
}

TEST_CASE("stage refuses bad requests, naming the value and the limit") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const int64_t V = ckpt.config().vocab_size;
  InProcessRun p(ckpt, *ops, {{0, 7}}, 8, false);
  Stage& s = p.stage(0);
  FBuf h = ops->alloc(16 * 4 * 256);

  CHECK_THROWS_WITH_AS(s.decode(1, h.data(), nullptr), doctest::Contains("no prefill"), Error);
  CHECK_THROWS_WITH_AS(s.prefill({}, h.data(), nullptr), doctest::Contains("empty prompt"), Error);
  CHECK_THROWS_WITH_AS(s.prefill(std::vector<int32_t>(9, 3), h.data(), nullptr),
                       doctest::Contains("prompt of 9 tokens exceeds max_seq 8"), Error);
  CHECK_THROWS_WITH_AS(s.prefill({1, static_cast<int32_t>(V), 2}, h.data(), nullptr),
                       doctest::Contains("token id 512 at index 1 outside [0, vocab_size 512)"),
                       Error);
  CHECK_THROWS_WITH_AS(s.prefill({-1}, h.data(), nullptr), doctest::Contains("token id -1"), Error);
  s.prefill(std::vector<int32_t>(8, 3), h.data(), nullptr);
  CHECK_THROWS_WITH_AS(s.decode(3, h.data(), nullptr),
                       doctest::Contains("position 8 is past max_seq 8"), Error);
  CHECK_THROWS_WITH_AS(s.verify({3}, h.data(), nullptr), doctest::Contains("without the drafter"),
                       Error);
  CHECK_THROWS_AS(Stage(ckpt, *ops, stage_spec(0, 1, {0, 8}, 8, false)), Error);
  CHECK_THROWS_AS(Stage(ckpt, *ops, stage_spec(0, 1, {0, 7}, 257, false)), Error);
}
