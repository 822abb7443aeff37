// CUDA vs CPU: hyper-connections (MODEL.md §4.4, §4.5, §4.25 steps 1-3, SPECDECODE §2.3).
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

namespace {
constexpr int kHc = 4, kHidden = 256, kRows = 3;
}

TEST_CASE("hc_pre twin: f32 mixes, f64 Sinkhorn, f32 collapse") {
  Backends b;
  Rng rng(21);
  Store store;
  const int m = (2 + kHc) * kHc;
  HcParams p;
  p.fn = store.f32("hc_attn_fn", {m, kHc * kHidden}, rng.normals(static_cast<size_t>(m) * kHc * kHidden, 0.05f));
  p.base = store.f32("hc_attn_base", {m}, rng.normals(m, 0.5f));
  p.scale = store.f32("hc_attn_scale", {3}, {0.7f, 1.3f, 2.0f});
  PairF h = put(b, rng.normals(static_cast<size_t>(kRows) * kHc * kHidden));
  PairF y = zeros(b, kRows * kHidden), post = zeros(b, kRows * kHc), comb = zeros(b, kRows * kHc * kHc);
  for (int s : {kCpu, kGpu})
    b.at(s).hc_pre(h[s], kRows, kHc, kHidden, p, 1e-6, 1e-6, 20, y[s], post[s], comb[s]);
  // f32 mix dots (1024 terms) vs f64: ~1e-6 relative on the mix, damped by the sigmoid /
  // softmax; 20 Sinkhorn rounds keep it below 1e-5.
  check_close("hc_pre y", get(b, y, kCpu), get(b, y, kGpu), 1e-5, 1e-5);
  check_close("hc_pre post", get(b, post, kCpu), get(b, post, kGpu), 1e-5, 1e-5);
  check_close("hc_pre comb", get(b, comb, kCpu), get(b, comb, kGpu), 1e-5, 1e-5);
}

TEST_CASE("hc_post twin: post x + comb^T res (bit-exact)") {
  Backends b;
  Rng rng(22);
  PairF x = put(b, rng.normals(kRows * kHidden)), res = put(b, rng.normals(kRows * kHc * kHidden));
  PairF post = put(b, rng.normals(kRows * kHc)), comb = put(b, rng.normals(kRows * kHc * kHc));
  PairF out = zeros(b, res.n);
  for (int s : {kCpu, kGpu}) b.at(s).hc_post(x[s], res[s], post[s], comb[s], kRows, kHc, kHidden, out[s]);
  // Same f32 operations in the same order: exact.
  check_close("hc_post", get(b, out, kCpu), get(b, out, kGpu), 0, 0);
}

TEST_CASE("hc_head and hc_mean twins") {
  Backends b;
  Rng rng(23);
  Store store;
  HeadWeights w;
  w.hc_head_fn = store.f32("hc_head_fn", {kHc, kHc * kHidden}, rng.normals(kHc * kHc * kHidden, 0.05f));
  w.hc_head_base = store.f32("hc_head_base", {kHc}, rng.normals(kHc, 0.5f));
  w.hc_head_scale = store.f32("hc_head_scale", {1}, {0.8f});
  PairF h = put(b, rng.normals(kRows * kHc * kHidden));
  PairF y = zeros(b, kRows * kHidden);
  for (int s : {kCpu, kGpu}) b.at(s).hc_head(h[s], kRows, kHc, kHidden, w, 1e-6, 1e-6, y[s]);
  // f32 mix dots vs f64 through a sigmoid: bound 1e-5.
  check_close("hc_head", get(b, y, kCpu), get(b, y, kGpu), 1e-5, 1e-5);
  const int stride = kHidden + 16;
  PairF mean = zeros(b, kRows * stride);
  for (int s : {kCpu, kGpu}) b.at(s).hc_mean(h[s], kRows, kHc, kHidden, mean[s], stride);
  // f64 sum of 4 floats, one rounding, on both: exact.
  check_close("hc_mean", get(b, mean, kCpu), get(b, mean, kGpu), 0, 0);
}

}  // namespace dsv4::twin
