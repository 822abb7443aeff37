// Issue 13 chunked prefill on the CPU backend: a prompt sent in chunks (a prefill of the
// first, then extend operations) leaves the caches, the last row's logits and the greedy
// decode after it of the unchunked prefill bit for bit (MODEL.md §6.7 law 2).
#include <doctest/doctest.h>

#include "stage/coordinator.h"
#include "stage/drafter.h"
#include "stage_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

constexpr int64_t kMaxSeq = 96;
constexpr int kDecode = 4;  // greedy steps after the prompt

int32_t argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// What a prefill leaves: the last row's logits, the live caches (§6.7 item 2), then the
// logits of kDecode greedy decode steps after it.
struct PrefillOutcome {
  std::vector<float> last_logits;
  std::vector<CacheClass> caches;
  std::vector<std::vector<float>> decode_logits;
};

PrefillOutcome run_prompt(InProcessRun& run, const std::vector<int32_t>& prompt, int64_t chunk,
                          int64_t vocab) {
  PrefillOutcome out;
  if (chunk == 0) {
    const std::vector<float> rows = run.prefill(prompt);
    out.last_logits.assign(rows.end() - vocab, rows.end());
  } else {
    out.last_logits = run.prefill_chunks(prompt, chunk);
  }
  out.caches = run.cache_classes(false);
  int32_t token = argmax(out.last_logits);
  for (int i = 0; i < kDecode; ++i) {
    out.decode_logits.push_back(run.decode(token));
    token = argmax(out.decode_logits.back());
  }
  return out;
}

void check_same(const PrefillOutcome& got, const PrefillOutcome& want) {
  REQUIRE(got.last_logits.size() == want.last_logits.size());
  CHECK(same_bits(got.last_logits.data(), want.last_logits.data(), want.last_logits.size()));
  CHECK(first_cache_difference(got.caches, want.caches) == "");
  REQUIRE(got.decode_logits.size() == want.decode_logits.size());
  for (size_t i = 0; i < want.decode_logits.size(); ++i) {
    INFO("decode step " << i);
    CHECK(argmax(got.decode_logits[i]) == argmax(want.decode_logits[i]));
    CHECK(same_bits(got.decode_logits[i].data(), want.decode_logits[i].data(),
                    want.decode_logits[i].size()));
  }
}

}  // namespace

// Tiny: W = 16, ratios 0 / 4 / 16, index_topk 8. Chunk 1 (pure decode steps), chunks below
// W, of W, above W, not dividing the length; lengths crossing the ratio-4 and ratio-16
// block boundaries and past topk (37 rows: 9 ratio-4 blocks > 8).
TEST_CASE("chunked prefill equals the unchunked prefill bit for bit: logits, caches, decode") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const int64_t V = ckpt.config().vocab_size;
  const std::vector<int32_t> ids = random_tokens(83, V, 1313);
  for (int p : {5, 17, 37, 64, 83}) {
    const std::vector<int32_t> prompt(ids.begin(), ids.begin() + p);
    InProcessRun whole(ckpt, *ops, {{0, 7}}, kMaxSeq, false);
    const PrefillOutcome want = run_prompt(whole, prompt, 0, V);
    for (int64_t chunk : {1, 3, 7, 16, 20, 40}) {
      if (chunk >= p) continue;
      CAPTURE(p);
      CAPTURE(chunk);
      InProcessRun chunked(ckpt, *ops, {{0, 7}}, kMaxSeq, false, nullptr, chunk);
      check_same(run_prompt(chunked, prompt, chunk, V), want);
      CHECK(chunked.stage(0).pos() == p + kDecode);
    }
  }
}

// The layers of a ratio class share the index rows of a call (Layer::call_index: built by
// the call's first layer of the class, the same key reused): a stage that ran another
// prompt of the same length and chunks, then was reset, gives a fresh stage's bits — the
// ratio-4 rows, whose top-k columns every layer rewrites, included.
TEST_CASE("a second prompt on a reset stage (the index rows of the same calls kept) equals a fresh stage") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const int64_t V = ckpt.config().vocab_size;
  const std::vector<int32_t> first = random_tokens(37, V, 71), second = random_tokens(37, V, 72);
  for (int64_t chunk : {0, 16}) {
    CAPTURE(chunk);
    InProcessRun fresh(ckpt, *ops, {{0, 7}}, kMaxSeq, false, nullptr, chunk);
    const PrefillOutcome want = run_prompt(fresh, second, chunk, V);
    InProcessRun reused(ckpt, *ops, {{0, 7}}, kMaxSeq, false, nullptr, chunk);
    const PrefillOutcome other = run_prompt(reused, first, chunk, V);
    CHECK_FALSE(same_bits(other.last_logits.data(), want.last_logits.data(), want.last_logits.size()));
    reused.reset();
    check_same(run_prompt(reused, second, chunk, V), want);
  }
}

TEST_CASE("chunked prefill across stages [0,3) + [3,5) + [5,7) equals one stage unchunked") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const int64_t V = ckpt.config().vocab_size;
  const std::vector<int32_t> prompt = random_tokens(45, V, 99);
  InProcessRun whole(ckpt, *ops, {{0, 7}}, kMaxSeq, false);
  const PrefillOutcome want = run_prompt(whole, prompt, 0, V);
  for (int64_t chunk : {6, 19}) {
    CAPTURE(chunk);
    InProcessRun split(ckpt, *ops, {{0, 3}, {3, 5}, {5, 7}}, kMaxSeq, false, nullptr, chunk);
    check_same(run_prompt(split, prompt, chunk, V), want);
  }
}

TEST_CASE("the Coordinator sends a long prompt in chunks: tokens and logits of the whole prompt") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const int64_t V = ckpt.config().vocab_size;
  GenerationRequest req;
  req.prompt = random_tokens(50, V, 4242);
  req.max_new = 6;
  req.keep_logits = true;

  InProcessRun whole(ckpt, *ops, {{0, 7}}, kMaxSeq, false);
  Coordinator one(whole.front(), whole.control(), kMaxSeq, V);
  const GenerationResult want = one.generate(req);
  REQUIRE(want.tokens.size() == 6);

  // Stages of 16-row operations: a 50-row prefill operation would be refused.
  InProcessRun split(ckpt, *ops, {{0, 4}, {4, 7}}, kMaxSeq, false, nullptr, 16);
  REQUIRE(split.stage(0).chunk_rows() == 16);
  Coordinator chunked(split.front(), split.control(), kMaxSeq, V, split.stage(0).chunk_rows());
  const GenerationResult got = chunked.generate(req);
  CHECK(got.tokens == want.tokens);
  REQUIRE(got.logits.size() == want.logits.size());
  for (size_t i = 0; i < want.logits.size(); ++i)
    CHECK(same_bits(got.logits[i].data(), want.logits[i].data(), want.logits[i].size()));
}

TEST_CASE("chunked stages refuse chunks they cannot take, naming the limit") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  InProcessRun run(ckpt, *ops, {{0, 7}}, 40, false, nullptr, 8);
  Stage& s = run.stage(0);
  CHECK(s.chunk_rows() == 8);
  FBuf h = ops->alloc(16 * 4 * 256);
  CHECK_THROWS_WITH_AS(s.extend({1, 2}, h.data(), nullptr), doctest::Contains("no prefill"), Error);
  CHECK_THROWS_WITH_AS(s.prefill(std::vector<int32_t>(9, 3), h.data(), nullptr),
                       doctest::Contains("9 rows exceed prefill_chunk 8"), Error);
  s.prefill(std::vector<int32_t>(8, 3), h.data(), nullptr);
  CHECK_THROWS_WITH_AS(s.extend(std::vector<int32_t>(9, 3), h.data(), nullptr),
                       doctest::Contains("chunk of 9 rows outside [1, prefill_chunk 8]"), Error);
  for (int i = 0; i < 4; ++i) s.extend(std::vector<int32_t>(8, 3), h.data(), nullptr);
  CHECK(s.pos() == 40);
  CHECK_THROWS_WITH_AS(s.extend({3}, h.data(), nullptr),
                       doctest::Contains("prompt of 41 tokens exceeds max_prompt 40"), Error);
  CHECK_THROWS_WITH_AS(Stage(ckpt, *ops, stage_spec(0, 1, {0, 7}, 40, false, -1)),
                       doctest::Contains("prefill_chunk -1"), Error);
}

// R-D5 over chunks (stage/pipeline.cpp prime_chunk): chunks below W append their ring rows,
// chunks of W or more prime afresh; either way the rings, the caches with taps on and the
// next proposal are those of the whole prompt.
TEST_CASE("chunked prefill primes the DSpark rings as the whole prompt does") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const int64_t V = ckpt.config().vocab_size;
  const std::vector<int32_t> prompt = random_tokens(45, V, 5);
  DsparkDrafter whole_drafter(ckpt, *ops, Numerics{}, kMaxSeq);
  InProcessRun whole(ckpt, *ops, {{0, 7}}, kMaxSeq, true, &whole_drafter);
  const std::vector<float> rows = whole.prefill(prompt);
  const int32_t head = argmax({rows.end() - V, rows.end()});
  const Proposal want = whole_drafter.propose(head, 44);
  for (int64_t chunk : {5, 16, 20}) {
    CAPTURE(chunk);
    DsparkDrafter drafter(ckpt, *ops, Numerics{}, kMaxSeq);
    InProcessRun chunked(ckpt, *ops, {{0, 4}, {4, 7}}, kMaxSeq, true, &drafter, chunk);
    CHECK(argmax(chunked.prefill_chunks(prompt, chunk)) == head);
    CHECK(drafter.ring_pos() == 45);
    CHECK(first_cache_difference(drafter.ring_classes(), whole_drafter.ring_classes()) == "");
    CHECK(first_cache_difference(chunked.cache_classes(false), whole.cache_classes(false)) == "");
    const Proposal got = drafter.propose(head, 44);
    CHECK(got.out_ids == want.out_ids);
    CHECK(same_bits(got.confidence.data(), want.confidence.data(), want.confidence.size()));
  }
}
