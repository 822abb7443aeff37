// Hyper-connections (MODEL.md §4.4, §4.5, §4.25 steps 1-3) against hc.json, plus
// Sinkhorn's doubly-stochastic law and hc_post against a direct f64 loop.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/hc.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

TEST_CASE("hc_pre: mixes, Sinkhorn split (eps placement) and collapse match hc.json") {
  for (const VectorCase& c : load_cases("hc.json", "hc_pre")) {
    SUBCASE(c.name.c_str()) {
      const VectorArray h_in = c.input("h");
      const std::vector<float> h = h_in.f32(), fn = c.input("fn").f32(),
                               scale = c.input("scale").f32(), base = c.input("base").f32();
      const int s = static_cast<int>(h_in.dim(0)), hc = c.param<int>("hc_mult"),
                hidden = c.param<int>("hidden"), m = (2 + hc) * hc,
                iters = c.param<int>("hc_sinkhorn_iters");
      const double norm_eps = c.param<double>("rms_norm_eps"), hc_eps = c.param<double>("hc_eps");
      const int width = hc * hidden;

      // Stages, to locate a fault: mix (f64) and the split alone.
      std::vector<float> mix, pre(s * hc), post(s * hc), comb(s * hc * hc);
      for (int t = 0; t < s; ++t) {
        std::vector<double> mt(m);
        cpu_hc_mixes(h.data() + t * width, width, fn.data(), m, norm_eps, mt.data());
        for (double v : mt) mix.push_back(static_cast<float>(v));
        cpu_hc_split(mt.data(), hc, scale.data(), base.data(), hc_eps, iters, pre.data() + t * hc,
                     post.data() + t * hc, comb.data() + t * hc * hc);
      }
      // Bounds from the vector file (comb has its own per-key relative bound).
      compare_key(c, "mix", mix);
      compare_key(c, "pre", pre);

      // The op itself.
      HcParams p{f32_view("hc.fn", {m, width}, fn), f32_view("hc.base", {m}, base),
                 f32_view("hc.scale", {3}, scale)};
      CpuWeightCache cache;
      std::vector<float> y(s * hidden), op_post(s * hc), op_comb(s * hc * hc);
      cpu_hc_pre(cache, h.data(), s, hc, hidden, p, norm_eps, hc_eps, iters, y.data(),
                 op_post.data(), op_comb.data());
      CHECK(op_post == post);
      CHECK(op_comb == comb);
      compare_key(c, "post", op_post);
      compare_key(c, "comb", op_comb);
      compare_key(c, "y", y);
    }
  }
}

TEST_CASE("hc_post: h'[t,k] = post[t,k] x[t] + sum_j comb[t,j,k] res[t,j] matches hc.json") {
  for (const VectorCase& c : load_cases("hc.json", "hc_post")) {
    SUBCASE(c.name.c_str()) {
      const VectorArray x = c.input("x");
      const int s = static_cast<int>(x.dim(0)), hc = c.param<int>("hc_mult"),
                hidden = c.param<int>("hidden");
      std::vector<float> out(s * hc * hidden);
      cpu_hc_post(x.f32().data(), c.input("res").f32().data(), c.input("post").f32().data(),
                  c.input("comb").f32().data(), s, hc, hidden, out.data());
      compare_key(c, "h", out);  // bounds from the vector file
    }
  }
}

TEST_CASE("hc_head: sigmoid gate + hc_eps (no Sinkhorn) and collapse match hc.json") {
  for (const VectorCase& c : load_cases("hc.json", "hc_head")) {
    SUBCASE(c.name.c_str()) {
      const VectorArray h_in = c.input("h");
      const std::vector<float> h = h_in.f32(), fn = c.input("fn").f32(),
                               scale = c.input("scale").f32(), base = c.input("base").f32();
      const int s = static_cast<int>(h_in.dim(0)), hc = c.param<int>("hc_mult"),
                hidden = c.param<int>("hidden"), width = hc * hidden;
      const double norm_eps = c.param<double>("rms_norm_eps");
      std::vector<float> mixh;
      for (int t = 0; t < s; ++t) {
        std::vector<double> mt(hc);
        cpu_hc_mixes(h.data() + t * width, width, fn.data(), hc, norm_eps, mt.data());
        for (double v : mt) mixh.push_back(static_cast<float>(v));
      }
      compare_key(c, "mixh", mixh);  // bounds from the vector file

      HeadWeights w;
      w.hc_head_fn = f32_view("hc_head_fn", {hc, width}, fn);
      w.hc_head_base = f32_view("hc_head_base", {hc}, base);
      w.hc_head_scale = f32_view("hc_head_scale", {1}, scale);
      CpuWeightCache cache;
      std::vector<float> y(s * hidden);
      cpu_hc_head(cache, h.data(), s, hc, hidden, w, norm_eps, c.param<double>("hc_eps"),
                  y.data());
      compare_key(c, "y", y);
    }
  }
}

TEST_CASE("Sinkhorn comb is doubly stochastic: columns sum to 1, rows converge to 1") {
  std::mt19937 gen(11);
  std::normal_distribution<double> dist(0.0, 1.5);
  const int hc = 4, m = (2 + hc) * hc;
  const float scale[3] = {0.7f, 1.1f, 0.5f};  // comb logits spread of a few units
  std::vector<float> base(m);
  for (float& b : base) b = static_cast<float>(dist(gen));
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> mix(m);
    for (double& v : mix) v = dist(gen);
    for (int iters : {20, 100}) {
      float pre[hc], post[hc], comb[hc * hc];
      cpu_hc_split(mix.data(), hc, scale, base.data(), 1e-6, iters, pre, post, comb);
      for (int k = 0; k < hc; ++k) {
        double col = 0.0, row = 0.0;
        for (int j = 0; j < hc; ++j) col += comb[j * hc + k];
        for (int j = 0; j < hc; ++j) row += comb[k * hc + j];
        // Last step is a column normalization: sum = S/(S+eps) = 1 - ~1e-6, plus f32 rounding.
        CHECK(std::fabs(col - 1.0) < 4e-6);
        // Rows: 20 iterations leave ~5e-5 on these logits (bound 10x that); 100 converge.
        CHECK(std::fabs(row - 1.0) < (iters == 20 ? 5e-4 : 4e-6));
      }
      for (int c = 0; c < hc; ++c) {
        CHECK(pre[c] > 0.0f);  // sigmoid + eps lies in (eps, 1 + eps]
        CHECK(pre[c] <= 1.0f + 1e-6f);
        CHECK(post[c] >= 0.0f);  // 2 sigmoid lies in [0, 2]
        CHECK(post[c] <= 2.0f);
      }
    }
  }
}

TEST_CASE("hc_post equals a direct f64 loop over the source stream j (comb^T . res)") {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  const int s = 3, hc = 4, hidden = 16;
  std::vector<float> x(s * hidden), res(s * hc * hidden), post(s * hc), comb(s * hc * hc);
  for (auto* v : {&x, &res, &post, &comb})
    for (float& e : *v) e = dist(gen);
  std::vector<float> out(res.size());
  cpu_hc_post(x.data(), res.data(), post.data(), comb.data(), s, hc, hidden, out.data());
  for (int t = 0; t < s; ++t)
    for (int k = 0; k < hc; ++k)
      for (int d = 0; d < hidden; ++d) {
        double want = double(post[t * hc + k]) * x[t * hidden + d];
        double mag = std::fabs(want);
        for (int j = 0; j < hc; ++j) {
          const double term = double(comb[(t * hc + j) * hc + k]) * res[(t * hc + j) * hidden + d];
          want += term;
          mag += std::fabs(term);
        }
        // 5 f32 roundings of terms bounded by mag: |err| <= 5 * 2^-24 * mag.
        CHECK(std::fabs(out[(t * hc + k) * hidden + d] - want) <= 5 * 0x1p-24 * mag);
      }
}
