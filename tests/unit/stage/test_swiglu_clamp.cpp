// CHECKPOINT.md §6.2 coverage of the SwiGLU clamp (MODEL.md §4.23 step 2): over a
// 128-token run of the tiny model some routed expert's g or u pre-activation passes
// +-swiglu_limit, so the clamp changes the MoE output. Observed through an Ops decorator
// on the CPU backend (host memory), which re-runs every moe call without the clamp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/forwarding_ops.h"
#include "model/codecs.h"
#include "stage_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

// Forwards every op to the CPU backend; moe() also measures the routed pre-activations.
class ClampProbe : public ForwardingOps {
 public:
  explicit ClampProbe(Ops& base) : ForwardingOps(base) {}
  double max_g = 0, max_u = 0;  // largest |g|, |u| of a selected routed expert (f64 dot of f32 x)
  int calls = 0, calls_changed = 0;

  void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
           int k, float limit, const Numerics& num, float* out) override {
    inner().moe(b, x, rows, sel, wt, k, limit, num, out);
    const int hidden = static_cast<int>(b.gate_weight.dim(1));
    std::vector<float> unclamped(static_cast<size_t>(rows) * hidden);
    inner().moe(b, x, rows, sel, wt, k, 0.0f, num, unclamped.data());
    ++calls;
    if (!same_bits(out, unclamped.data(), unclamped.size())) ++calls_changed;
    for (int t = 0; t < rows; ++t)
      for (int s = 0; s < k; ++s) {
        const ExpertWeights& e = b.experts.at(static_cast<size_t>(sel[t * k + s]));
        max_g = std::max(max_g, max_abs_row(decoded(e.w1), x + t * hidden, e.w1));
        max_u = std::max(max_u, max_abs_row(decoded(e.w3), x + t * hidden, e.w3));
      }
  }
  // The prefill's MoE (Ops::moe_gemm, on the CPU the same op): probed as well.
  void moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                int k, float limit, const Numerics& num, float* out) override {
    moe(b, x, rows, sel, wt, k, limit, num, out);
  }

 private:
  const std::vector<float>& decoded(const Fp4Linear& w) {
    auto it = cache_.find(w.weight.data);
    if (it == cache_.end()) it = cache_.emplace(w.weight.data, decode_fp4_linear(w)).first;
    return it->second;
  }
  static double max_abs_row(const std::vector<float>& w, const float* x, const Fp4Linear& l) {
    double m = 0;
    for (int64_t n = 0; n < l.rows; ++n) {
      double acc = 0;
      for (int64_t c = 0; c < l.cols; ++c) acc += static_cast<double>(x[c]) * w[n * l.cols + c];
      m = std::max(m, std::abs(acc));
    }
    return m;
  }

  std::map<const uint8_t*, std::vector<float>> cache_;
};

}  // namespace

TEST_CASE("swiglu clamp is exercised: some routed g or u passes +-swiglu_limit in 128 tokens") {
  Checkpoint ckpt(tiny_dir());
  auto cpu = make_cpu_ops();
  ClampProbe probe(*cpu);
  const ModelConfig& c = ckpt.config();
  const std::vector<int32_t> ids = random_tokens(128, c.vocab_size, 5150);
  InProcessRun run(ckpt, probe, {{0, 7}}, 128, false);
  run.prefill({ids.begin(), ids.begin() + 64});
  for (int p = 64; p < 128; ++p) run.decode(ids[p]);
  MESSAGE("max |g| = " << probe.max_g << ", max |u| = " << probe.max_u << " (limit "
                       << c.swiglu_limit << "); moe calls changed by the clamp: "
                       << probe.calls_changed << " of " << probe.calls);
  CHECK(std::max(probe.max_g, probe.max_u) > c.swiglu_limit);
  CHECK(probe.calls_changed > 0);
}
