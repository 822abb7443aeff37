// Compressor pooling and finishing (MODEL.md §4.16 steps 3-6, §6.4) against
// compressor.json, plus a naive f64 pooling check and the prefill-vs-pending law.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cpu/compressor.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/norm.h"
#include "tests/test_views.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

// Weights of one compressor over test-owned buffers (ape [r, Lc], norm [d]).
CompressorWeights make_compressor(int ratio, int d, bool rotate, const std::vector<float>& ape,
                                  const std::vector<float>& norm) {
  CompressorWeights c;
  c.ratio = ratio;
  c.overlap = ratio == 4;
  c.rotate = rotate;
  c.d = d;
  c.ape = f32_view("compressor.ape", {ratio, c.latent()}, ape);
  c.norm = f32_view("compressor.norm.weight", {d}, norm);
  return c;
}

// A YaRN table holding only the rows at the case's block positions (rope_cos/sin [nb, 32]).
RopeTable table_from_case(const VectorCase& c) {
  const std::vector<float> cos = c.input("rope_cos").f32(), sin = c.input("rope_sin").f32();
  const auto positions = c.param<std::vector<int64_t>>("rope_positions");
  RopeTable t;
  t.rope_dim = 64;
  t.positions = positions.back() + 1;
  t.freq.assign(32, 0.0f);
  t.fc.assign(static_cast<size_t>(t.positions) * 64, 0.0f);
  for (size_t j = 0; j < positions.size(); ++j)
    for (int i = 0; i < 32; ++i) {
      t.fc[positions[j] * 64 + 2 * i] = cos[j * 32 + i];
      t.fc[positions[j] * 64 + 2 * i + 1] = sin[j * 32 + i];
    }
  return t;
}

}  // namespace

TEST_CASE("compressor pool: per-dim softmax over prev|cur (overlap) or own rows, ape added, then norm") {
  for (const VectorCase& c : load_cases("compressor.json", "compressor_pool")) {
    SUBCASE(c.name.c_str()) {
      const int r = c.param<int>("ratio"), d = c.param<int>("d"), nb = c.param<int>("nb");
      const std::vector<float> ape = c.input("ape").f32(), norm = c.input("norm_weight").f32();
      const CompressorWeights cw = make_compressor(r, d, false, ape, norm);
      REQUIRE(cw.overlap == c.param<bool>("overlap"));
      CpuWeightCache cache;
      const int entries = cw.overlap ? 2 * r : r;
      std::vector<float> pooled(static_cast<size_t>(nb) * d), weights(static_cast<size_t>(nb) * entries * d);
      cpu_compressor_pool(cache, cw, c.input("kv").f32().data(), c.input("score").f32().data(),
                          nb, nullptr, nullptr, pooled.data(), weights.data());
      // f64 expected vs f32 softmax with f64 weighted sum: bounds from the vector file.
      compare_key(c, "pooled", pooled);
      if (c.has_expected("weights")) compare_key(c, "weights", weights);
      std::vector<float> normed(pooled.size());
      cpu_rmsnorm(cache, pooled.data(), cw.norm, nb, d, c.param<double>("eps"), normed.data());
      compare_key(c, "normed", normed);
    }
  }
}

TEST_CASE("compressor prefill: pool, norm, rope at j*r, act_quant (both variants) or Hadamard+FP4") {
  for (const VectorCase& c : load_cases("compressor.json", "compressor_prefill")) {
    SUBCASE(c.name.c_str()) {
      const int r = c.param<int>("ratio"), d = c.param<int>("d"), nb = c.param<int>("nb");
      const std::vector<float> ape = c.input("ape").f32(), norm = c.input("norm_weight").f32();
      const std::vector<float> kv = c.input("kv").f32(), score = c.input("score").f32();
      const RopeTable rope = table_from_case(c);
      const double eps = c.param<double>("eps");
      CpuWeightCache cache;
      std::vector<float> out(static_cast<size_t>(nb) * d);
      auto run = [&](bool rotate, const Numerics& num) {
        const CompressorWeights cw = make_compressor(r, d, rotate, ape, norm);
        cpu_compress_blocks(cache, cw, kv.data(), score.data(), nb, nullptr, nullptr, 0, rope,
                            eps, num, out.data());
        return out;
      };
      std::vector<float> pooled(out.size());
      cpu_compressor_pool(cache, make_compressor(r, d, false, ape, norm), kv.data(), score.data(),
                          nb, nullptr, nullptr, pooled.data());
      // f64 expected vs f32 pipeline: bounds (and exact keys) from the vector file.
      compare_key(c, "pooled", pooled);
      Numerics num;
      num.kv_quant = KvQuant::clamp;
      const std::vector<float> clamp = run(false, num);
      compare_key(c, "attn_clamp", clamp);
      compare_key(c, "roped", clamp);  // ClampOnly is the identity on these inputs (D1)
      num.kv_quant = KvQuant::e4m3;
      compare_key(c, "attn_e4m3", run(false, num));
      if (c.has_expected("indexer_fp4")) {
        num.indexer_quant = IndexerQuant::fp4;
        compare_key(c, "indexer_fp4", run(true, num));
        num.indexer_quant = IndexerQuant::none;  // neither the rotation nor the FP4 rounding
        std::vector<float> plain = run(true, num);
        compare_key(c, "roped", plain);
        cpu_hadamard_fp4(plain.data(), nb, d, false);  // the rotation alone, step 6
        compare_key(c, "indexer_hadamard", plain);
      }
    }
  }
}

TEST_CASE("compressor pool equals a naive f64 softmax-weighted sum, with and without overlap") {
  for (const int r : {4, 16}) {
    CAPTURE(r);
    const int d = 8, nb = 3;
    const bool overlap = r == 4;
    const int Lc = overlap ? 2 * d : d;
    const std::vector<float> kv = random_uniform(static_cast<size_t>(nb) * r * Lc, 11 + r, -2, 2);
    const std::vector<float> score = random_uniform(kv.size(), 23 + r, -3, 3);
    const std::vector<float> ape = random_uniform(static_cast<size_t>(r) * Lc, 37 + r, -0.1f, 0.1f);
    const std::vector<float> norm = random_uniform(d, 41, 0.9f, 1.1f);
    const CompressorWeights cw = make_compressor(r, d, false, ape, norm);
    CpuWeightCache cache;
    std::vector<float> pooled(static_cast<size_t>(nb) * d);
    cpu_compressor_pool(cache, cw, kv.data(), score.data(), nb, nullptr, nullptr, pooled.data());
    for (int j = 0; j < nb; ++j)
      for (int e = 0; e < d; ++e) {
        // Entries (row, column, ape row) straight from §4.16 step 3.
        std::vector<double> l, v;
        auto add = [&](int row, int col, int i) {
          l.push_back(double(score[row * Lc + col]) + double(ape[i * Lc + col]));
          v.push_back(kv[row * Lc + col]);
        };
        for (int i = 0; i < r; ++i) {
          if (overlap && j >= 1) add((j - 1) * r + i, e, i);
          add(j * r + i, overlap ? d + e : e, i);
        }
        double m = -INFINITY, den = 0, num = 0;
        for (double x : l) m = std::max(m, x);
        for (size_t i = 0; i < l.size(); ++i) {
          den += std::exp(l[i] - m);
          num += std::exp(l[i] - m) * v[i];
        }
        // f32 softmax vs f64: a few f32 ulps of |v| <= 2, bound 1e-6.
        CHECK(std::fabs(pooled[j * d + e] - num / den) <= 1e-6);
      }
  }
}

TEST_CASE("compressor block j from prefill rows equals block j from a pending buffer prev|cur") {
  Numerics num;
  num.kv_quant = KvQuant::e4m3;  // exercise the rounding path too
  const RopeTable rope = make_rope_table(160000.0, 64, 512, nullptr);
  for (const int r : {4, 16}) {
    for (const bool rotate : {false, true}) {
      CAPTURE(r);
      CAPTURE(rotate);
      const int d = 128, nb = 4;
      const bool overlap = r == 4;
      const int Lc = overlap ? 2 * d : d;
      const std::vector<float> kv = random_uniform(static_cast<size_t>(nb) * r * Lc, 5 + r, -2, 2);
      const std::vector<float> score = random_uniform(kv.size(), 7 + r, -3, 3);
      const std::vector<float> ape = random_uniform(static_cast<size_t>(r) * Lc, 9, -0.1f, 0.1f);
      const std::vector<float> norm = random_uniform(d, 13, 0.9f, 1.1f);
      const CompressorWeights cw = make_compressor(r, d, rotate, ape, norm);
      CpuWeightCache cache;
      std::vector<float> prefill(static_cast<size_t>(nb) * d), one(d);
      cpu_compress_blocks(cache, cw, kv.data(), score.data(), nb, nullptr, nullptr, 0, rope, 1e-6,
                          num, prefill.data());
      // Decode layout (§6.4): overlap pending rows [0, r) = prev block, [r, 2r) = cur block;
      // the op receives cur as its own rows and prev through prev_kv / prev_score.
      for (int j = 0; j < nb; ++j) {
        const float* cur_kv = kv.data() + static_cast<size_t>(j) * r * Lc;
        const float* cur_score = score.data() + static_cast<size_t>(j) * r * Lc;
        std::vector<float> prev_kv(static_cast<size_t>(r) * Lc, 0.0f),
            prev_score(prev_kv.size(), -std::numeric_limits<float>::infinity());
        if (overlap && j >= 1) {
          std::memcpy(prev_kv.data(), cur_kv - r * Lc, prev_kv.size() * sizeof(float));
          std::memcpy(prev_score.data(), cur_score - r * Lc, prev_score.size() * sizeof(float));
        }
        cpu_compress_blocks(cache, cw, cur_kv, cur_score, 1, overlap ? prev_kv.data() : nullptr,
                            overlap ? prev_score.data() : nullptr, j, rope, 1e-6, num, one.data());
        CHECK(std::memcmp(one.data(), prefill.data() + static_cast<size_t>(j) * d,
                          d * sizeof(float)) == 0);
      }
    }
  }
}
