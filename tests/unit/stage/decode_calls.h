// The position independence of a plain decode step and of a verify round of T rows
// (issue 12), on any backend: a single-stage tiny model runs through a CallRecorder, and
// the calls of the steps at positions 15..31 and 254, 255 must equal those at 14 line for
// line, those of every round of T rows those of the first (CPU test:
// tests/unit/stage/test_device_step.cpp; CUDA: tests/gpu/test_decode_step_twin.cpp).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/stage/call_recorder.h"
#include "tests/unit/stage/stage_harness.h"

namespace dsv4::test {

// The first line where two call lists differ ("" when equal).
inline std::string first_difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return cat("call ", i, ": ", a[i], "  vs  ", b[i]);
  if (a.size() != b.size()) return cat(a.size(), " calls vs ", b.size());
  return "";
}

inline size_t count_op(const std::vector<std::string>& calls, const std::string& op) {
  return static_cast<size_t>(std::count_if(calls.begin(), calls.end(), [&](const std::string& c) {
    return c.rfind(op + " ", 0) == 0;
  }));
}

// The first call of `op` in calls (end() when none).
inline std::vector<std::string>::const_iterator find_call(const std::vector<std::string>& calls,
                                                          const std::string& op) {
  return std::find_if(calls.begin(), calls.end(), [&](const std::string& c) { return c.rfind(op + " ", 0) == 0; });
}

// A single-stage tiny model (layers 0..6) whose op calls are written down; drafter: the
// verify rows and taps.
struct RecordedStage {
  RecordedStage(Ops& backend, bool drafter, int64_t max_seq)
      : ckpt(tiny_dir()), cfg(ckpt.config()), rec(backend), stage(ckpt, rec, stage_spec(0, 1, {0, 7}, max_seq, drafter)) {}
  // The calls f() issues.
  template <class F>
  std::vector<std::string> calls_of(F&& f) {
    rec.calls.clear();
    rec.enabled = true;
    f();
    rec.enabled = false;
    return rec.calls;
  }
  Checkpoint ckpt;
  const ModelConfig& cfg;
  CallRecorder rec;
  Stage stage;
};

// What the calls of every position-independent step (plain or a verify round) hold: the
// StepState upload first, then one run_step with every other op in it; the embedding and
// the 7 layers' index rows on the backend; no host-array rope / embed / route / top-k, no
// host-pooled block, no host copy, no allocation.
inline void check_step_calls(const std::vector<std::string>& calls) {
  CHECK(count_op(calls, "upload_i32") == 1);
  REQUIRE(count_op(calls, "run_step") == 1);
  CHECK(calls.at(0).rfind("upload_i32 ", 0) == 0);
  CHECK(calls.at(1).rfind("run_step ", 0) == 0);
  CHECK(count_op(calls, "embed_dev") == 1);
  CHECK(count_op(calls, "decode_index") == 7);
  for (const char* host_op : {"rope", "embed", "route", "indexer_topk", "compress_blocks", "upload", "alloc",
                              "alloc_i32", "download", "download_i32"})
    CHECK_MESSAGE(count_op(calls, host_op) == 0, host_op);
}

// Positions 14 (no block completes), 15 (r = 4 and r = 16 blocks complete), 16 (the
// ring wraps), up to 31 (an r = 16 block after a full top-k); then 254 / 255, the last
// positions (255 completes blocks). One upload per step (the StepState), no host-array
// rope / embed / route / top-k, no allocation; the StepState upload comes before the
// step's Ops::run_step (a captured graph must not read the host), every op inside it.
inline void check_position_independent_decode(Ops& backend) {
  RecordedStage r(backend, false, 256);
  constexpr int kPrompt = 14;
  FBuf h = r.rec.alloc(static_cast<size_t>(kPrompt) * r.cfg.hc_mult * r.cfg.hidden_size);  // [prompt, hc, H]
  const std::vector<int32_t> ids = random_tokens(40, r.cfg.vocab_size, 4242);
  // One decode step at the stage's position, its calls.
  auto step = [&](int32_t token) { return r.calls_of([&] { r.stage.decode(token, h.data(), nullptr); }); };

  r.stage.prefill({ids.begin(), ids.begin() + kPrompt}, h.data(), nullptr);
  const std::vector<std::string> first = step(ids[kPrompt]);
  MESSAGE(first.size(), " op calls per step");
  check_step_calls(first);
  CHECK(count_op(first, "compress_at") == 8);  // layers 2-6: 5 attention + 3 indexer compressors
  CHECK(count_op(first, "finish_kv_at") == 7);  // the window latent of every layer
  CHECK(count_op(first, "head_rms_rope_dev") == 7);  // q
  CHECK(count_op(first, "rope_hadamard_fp4_dev") == 3);  // the indexer q
  CHECK(count_op(first, "hc_pre_norm") == 14);  // every layer's attention and ffn input
  CHECK(count_op(first, "sink_attention_rope_dev") == 7);
  CHECK(count_op(first, "moe_hc_post") == 7);
  for (const char* fused : {"head_rms", "kv_act_quant", "hadamard_fp4", "hc_pre", "sink_attention", "moe"})
    CHECK_MESSAGE(count_op(first, fused) == 0, fused);

  for (int32_t p = 15; p <= 31; ++p) {
    INFO("position " << p);
    CHECK(first_difference(first, step(ids[p])) == "");
  }
  r.stage.fill_for_benchmark(254, 9);
  for (int32_t p : {254, 255}) {
    INFO("position " << p);
    CHECK(first_difference(first, step(ids[p % 40])) == "");
  }
}

// Verify rounds of T = 1..4 rows (the drafter's stage), each from positions 14.. up to the
// last ones, committed in full (commit is outside the round's step): every round of T rows
// issues the calls of the first one, line for line — one StepState upload, then one
// run_step holding every op: no host-array op, no allocation, no index upload — and a round
// of one row is another step (run_step key) than a plain decode.
inline void check_position_independent_verify(Ops& backend) {
  constexpr int64_t kMaxSeq = 256;
  RecordedStage r(backend, true, kMaxSeq);
  REQUIRE(r.cfg.dspark.block_size + 1 >= 4);
  constexpr int kPrompt = 14;
  FBuf h = r.rec.alloc(static_cast<size_t>(kPrompt) * r.cfg.hc_mult * r.cfg.hidden_size);  // [prompt, hc, H]
  FBuf taps = r.rec.alloc(static_cast<size_t>(kPrompt) * r.cfg.dspark.target_layer_ids.size() * r.cfg.hidden_size);
  const std::vector<int32_t> ids = random_tokens(static_cast<int>(kMaxSeq), r.cfg.vocab_size, 4343);
  // One round of t rows at the stage's position, committed in full: the round's calls.
  auto round = [&](int t) {
    const int64_t p = r.stage.pos();
    const std::vector<std::string> calls =
        r.calls_of([&] { r.stage.verify({ids.begin() + p, ids.begin() + p + t}, h.data(), taps.data()); });
    r.stage.commit(t);
    return calls;
  };
  for (int t = 1; t <= 4; ++t) {
    CAPTURE(t);
    r.stage.prefill({ids.begin(), ids.begin() + kPrompt}, h.data(), taps.data());
    const std::vector<std::string> first = round(t);
    check_step_calls(first);
    CHECK(count_op(first, "compress_at") == 8 * static_cast<size_t>(t));  // one per row and compressor
    // The rounds cover every residue mod 4 and 16 at every row up to position 40.
    while (r.stage.pos() + t <= 40) {
      INFO("round at " << r.stage.pos());
      CHECK(first_difference(first, round(t)) == "");
    }
    r.stage.fill_for_benchmark(kMaxSeq - t, 9);
    INFO("round at " << r.stage.pos());
    CHECK(first_difference(first, round(t)) == "");  // the last positions
  }
  // A plain step after the rounds: its run_step has another owner than a round of one row.
  r.stage.prefill({ids.begin(), ids.begin() + kPrompt}, h.data(), taps.data());
  const std::vector<std::string> one = round(1);
  const std::vector<std::string> plain =
      r.calls_of([&] { r.stage.decode(ids[static_cast<size_t>(r.stage.pos())], h.data(), taps.data()); });
  REQUIRE(count_op(plain, "run_step") == 1);
  const auto owner = [](const std::vector<std::string>& calls) {
    std::istringstream fields(*find_call(calls, "run_step"));
    std::string op, who;
    fields >> op >> who;
    return who;
  };
  CHECK(owner(one) != owner(plain));
}

}  // namespace dsv4::test
