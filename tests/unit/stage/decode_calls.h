// The position independence of a plain decode step (issue 12), on any backend: a
// single-stage tiny model runs through a CallRecorder, and the calls of the steps at
// positions 15..31 and 254, 255 must equal those at 14 line for line (CPU test:
// tests/unit/stage/test_device_step.cpp; CUDA: tests/gpu/test_decode_step_twin.cpp).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
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

// Positions 14 (no block completes), 15 (r = 4 and r = 16 blocks complete), 16 (the
// ring wraps), up to 31 (an r = 16 block after a full top-k); then 254 / 255, the last
// positions (255 completes blocks). One upload per step (the StepState), no host-array
// rope / embed / route / top-k, no allocation; the StepState upload comes before the
// step's Ops::run_step (a captured graph must not read the host), every op inside it.
inline void check_position_independent_decode(Ops& backend) {
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  CallRecorder rec(backend);
  constexpr int64_t kMaxSeq = 256;
  Stage stage(ckpt, rec, stage_spec(0, 1, {0, 7}, kMaxSeq, false));
  constexpr int kPrompt = 14;
  FBuf h = rec.alloc(static_cast<size_t>(kPrompt) * c.hc_mult * c.hidden_size);  // [prompt, hc, H]
  const std::vector<int32_t> ids = random_tokens(40, c.vocab_size, 4242);

  // One decode step at the stage's position, its calls.
  auto step = [&](int32_t token) {
    rec.calls.clear();
    rec.enabled = true;
    stage.decode(token, h.data(), nullptr);
    rec.enabled = false;
    return rec.calls;
  };

  stage.prefill({ids.begin(), ids.begin() + kPrompt}, h.data(), nullptr);
  const std::vector<std::string> first = step(ids[kPrompt]);
  MESSAGE(first.size(), " op calls per step");
  CHECK(count_op(first, "upload_i32") == 1);
  REQUIRE(count_op(first, "run_step") == 1);
  CHECK(first.at(0).rfind("upload_i32 ", 0) == 0);
  CHECK(first.at(1).rfind("run_step ", 0) == 0);
  CHECK(count_op(first, "embed_dev") == 1);
  CHECK(count_op(first, "decode_index") == 7);
  CHECK(count_op(first, "compress_at") == 8);  // layers 2-6: 5 attention + 3 indexer compressors
  CHECK(count_op(first, "finish_kv_at") == 7);  // the window latent of every layer
  CHECK(count_op(first, "head_rms_rope_dev") == 7);  // q
  CHECK(count_op(first, "rope_hadamard_fp4_dev") == 3);  // the indexer q
  for (const char* fused : {"head_rms", "kv_act_quant", "hadamard_fp4"})
    CHECK_MESSAGE(count_op(first, fused) == 0, fused);
  for (const char* host_op : {"rope", "embed", "route", "indexer_topk", "compress_blocks", "upload", "alloc",
                              "alloc_i32", "download", "download_i32"})
    CHECK_MESSAGE(count_op(first, host_op) == 0, host_op);

  for (int32_t p = 15; p <= 31; ++p) {
    INFO("position " << p);
    CHECK(first_difference(first, step(ids[p])) == "");
  }
  stage.fill_for_benchmark(254, 9);
  for (int32_t p : {254, 255}) {
    INFO("position " << p);
    CHECK(first_difference(first, step(ids[p % 40])) == "");
  }
}

}  // namespace dsv4::test
