// The --profile-ops decorator (kernels/timed_ops.h) on the CPU backend: it counts every
// op it forwards, keys linears by weight class, times only while active, and changes no
// result (the wrapped run's logits equal the plain run's bit for bit).
#include <doctest/doctest.h>

#include <map>
#include <random>

#include "../stage/stage_harness.h"
#include "kernels/timed_ops.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

std::map<std::string, int64_t> calls_by_op(const TimedOps& t) {
  std::map<std::string, int64_t> m;
  for (const auto& r : t.rows()) m[r.op] = r.calls;
  return m;
}

}  // namespace

TEST_CASE("weight_class drops layer indices, the layers prefix and the weight suffix") {
  CHECK(weight_class("layers.3.attn.wq_b.weight") == "attn.wq_b");
  CHECK(weight_class("layers.41.ffn.shared_experts.w2.weight") == "ffn.shared_experts.w2");
  CHECK(weight_class("mtp.0.attn.wo_a.weight") == "mtp.attn.wo_a");
  CHECK(weight_class("head.weight") == "head");
  CHECK(weight_class("weight") == "weight");
}

TEST_CASE("TimedOps counts direct calls and times only while active") {
  Checkpoint ckpt(tiny_dir());
  auto cpu = make_cpu_ops();
  TimedOps timed(*cpu);
  const BlockWeights b = ckpt.load_block(0);
  const int64_t in = b.wq_b.in(), out = b.wq_b.out();

  std::mt19937 rng(4242);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(2 * in));
  for (auto& v : x) v = u(rng);
  FBuf dx = timed.alloc(x.size()), dy = timed.alloc(static_cast<size_t>(2 * out));
  timed.upload(dx.data(), x.data(), x.size());
  for (int i = 0; i < 3; ++i) timed.linear_fp8(b.wq_b, dx.data(), 2, true, dy.data());
  timed.add(dy.data(), dy.data(), 4);
  timed.set_active(false);
  timed.add(dy.data(), dy.data(), 4);  // not counted
  timed.set_active(true);
  timed.add(dy.data(), dy.data(), 4);

  const auto m = calls_by_op(timed);
  CHECK(m.size() == 3);
  CHECK(m.at("upload") == 1);
  CHECK(m.at("linear_fp8 attn.wq_b") == 3);
  CHECK(m.at("add") == 2);
  const std::string table = timed.table();
  CHECK(table.find("linear_fp8 attn.wq_b") != std::string::npos);
  CHECK(table.find("total") != std::string::npos);
}

TEST_CASE("a TimedOps-wrapped run gives the plain run's logits bit for bit") {
  constexpr int kPrompt = 5, kSteps = 6;
  constexpr int64_t kMaxSeq = 32;
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  const int L = c.num_hidden_layers;
  const std::vector<int32_t> ids = random_tokens(kPrompt + kSteps, c.vocab_size, 9001);
  auto run = [&](Ops& ops) {
    InProcessRun p(ckpt, ops, {{0, L}}, kMaxSeq, false);
    std::vector<float> got = p.prefill({ids.begin(), ids.begin() + kPrompt});
    for (int i = kPrompt; i < kPrompt + kSteps; ++i) {
      const std::vector<float> step = p.decode(ids[i]);
      got.insert(got.end(), step.begin(), step.end());
    }
    return got;
  };
  auto cpu = make_cpu_ops();
  const std::vector<float> want = run(*cpu);
  TimedOps timed(*cpu);
  const std::vector<float> got = run(timed);
  REQUIRE(got.size() == want.size());
  CHECK(same_bits(got.data(), want.data(), got.size()));

  // MODEL.md §5: every layer runs hc_pre twice (attention, ffn) and the MoE once per
  // operation (one prefill + kSteps decode steps): the prefill's as moe_gemm (issue 13), a
  // decode step's as hc_pre_norm and moe_hc_post (issue 12: fused with the norm / hc_post).
  const auto m = calls_by_op(timed);
  CHECK(m.count("moe") == 0);
  CHECK(m.at("moe_hc_post") == int64_t{L} * kSteps);
  CHECK(m.at("moe_gemm") == int64_t{L});
  CHECK(m.at("hc_pre") == 2 * int64_t{L});
  CHECK(m.at("hc_pre_norm") == 2 * int64_t{L} * kSteps);
}
