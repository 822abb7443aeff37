// RoPE tables (MODEL.md §4.6, D8) and application (§4.7) against rope.json, the inverse
// law, and the Appendix A check values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/cpu/rope.h"
#include "kernels/rope_table.h"
#include "base/error.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

constexpr int kRopeDim = 64;

YarnConfig flash_yarn() {
  YarnConfig y;
  y.factor = 16.0;
  y.original_max_position_embeddings = 65536;
  y.beta_fast = 32.0;
  y.beta_slow = 1.0;
  return y;
}

// The table a rope.json case describes, covering positions [0, max_position].
RopeTable table_of(const VectorCase& c, int64_t max_position) {
  const nlohmann::json& yarn = c.params.at("yarn");
  if (yarn.is_null()) return make_rope_table(c.param<double>("base"), kRopeDim, max_position + 1, nullptr);
  YarnConfig y;
  y.factor = yarn.at("factor").get<double>();
  y.original_max_position_embeddings = yarn.at("original_max_position_embeddings").get<int64_t>();
  y.beta_fast = yarn.at("beta_fast").get<double>();
  y.beta_slow = yarn.at("beta_slow").get<double>();
  return make_rope_table(c.param<double>("base"), kRopeDim, max_position + 1, &y);
}

}  // namespace

TEST_CASE("rope tables: freq bit-exact, then angle = fl32(fl32(p) freq) and f64 cos/sin match rope.json") {
  for (const VectorCase& c : load_cases("rope.json", "rope_table")) {
    SUBCASE(c.name.c_str()) {
      const auto positions = c.param<std::vector<int64_t>>("positions");
      const RopeTable t = table_of(c, positions.back());
      REQUIRE(t.rope_dim == kRopeDim);
      // freq first: angles and cos/sin at large p only match with bit-identical freq.
      compare_key(c, "freq", t.freq);
      REQUIRE(t.freq == c.expect("freq").f32());
      std::vector<float> angle, cos_v, sin_v;
      for (int64_t p : positions)
        for (int i = 0; i < kRopeDim / 2; ++i) {
          // D8's angle law on the table's own freq; the file pins the result exactly.
          angle.push_back(static_cast<float>(p) * t.freq[i]);
          cos_v.push_back(t.fc[p * kRopeDim + 2 * i]);
          sin_v.push_back(t.fc[p * kRopeDim + 2 * i + 1]);
        }
      compare_key(c, "angle", angle);
      compare_key(c, "cos", cos_v);  // 1.2e-7 absolute: one f32 ulp of a value <= 1
      compare_key(c, "sin", sin_v);
    }
  }
}

TEST_CASE("rope apply: interleaved pairs of the last 64 dims, forward and inverse (-sin) match rope.json") {
  const auto table_cases = load_cases("rope.json", "rope_table");
  for (const VectorCase& c : load_cases("rope.json", "rope_apply")) {
    SUBCASE(c.name.c_str()) {
      const VectorCase* tc = nullptr;
      for (const VectorCase& cand : table_cases)
        if (cand.name == "rope_table_" + c.param<std::string>("table")) tc = &cand;
      REQUIRE(tc != nullptr);
      const auto pos64 = c.param<std::vector<int64_t>>("positions");
      const std::vector<int32_t> positions(pos64.begin(), pos64.end());
      const RopeTable t = table_of(*tc, *std::max_element(pos64.begin(), pos64.end()));
      // The case's table rows are the engine table's rows.
      const std::vector<float> cos_in = c.input("cos").f32(), sin_in = c.input("sin").f32();
      for (size_t r = 0; r < positions.size(); ++r)
        for (int i = 0; i < kRopeDim / 2; ++i) {
          CHECK(t.fc[positions[r] * kRopeDim + 2 * i] == cos_in[r * 32 + i]);
          CHECK(t.fc[positions[r] * kRopeDim + 2 * i + 1] == sin_in[r * 32 + i]);
        }
      const VectorArray v = c.input("v");
      const int rows = static_cast<int>(v.dim(0)), L = c.param<int>("L");
      std::vector<float> fwd = v.f32(), inv = v.f32();
      cpu_rope(fwd.data(), rows, 1, L, t, positions.data(), false);
      cpu_rope(inv.data(), rows, 1, L, t, positions.data(), true);
      compare_key(c, "forward", fwd);  // f32 complex multiply vs f64: bounds from the file
      compare_key(c, "inverse", inv);
      const std::vector<float> orig = v.f32();
      for (int r = 0; r < rows; ++r)
        for (int d = 0; d < L - kRopeDim; ++d) {  // non-rope dims untouched bit for bit
          CHECK(fwd[r * L + d] == orig[r * L + d]);
          CHECK(inv[r * L + d] == orig[r * L + d]);
        }
    }
  }
}

TEST_CASE("inverse rope undoes forward rope (heads share the row's position)") {
  const YarnConfig y = flash_yarn();
  const RopeTable t = make_rope_table(160000.0, kRopeDim, 5000, &y);
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int rows = 3, heads = 2, dim = 128;
  const int32_t positions[rows] = {0, 17, 4999};
  std::vector<float> v(rows * heads * dim);
  for (float& e : v) e = dist(gen);
  std::vector<float> w = v;
  cpu_rope(w.data(), rows, heads, dim, t, positions, false);
  cpu_rope(w.data(), rows, heads, dim, t, positions, true);
  for (size_t i = 0; i < v.size(); ++i)
    // |v| <= 1; two f32 rotations with |cos^2 + sin^2 - 1| <= 2^-23: error below 1e-6.
    CHECK(std::fabs(w[i] - v[i]) <= 1e-6);
  const int32_t beyond[1] = {5000};
  CHECK_THROWS_AS(cpu_rope(w.data(), 1, 1, dim, t, beyond, false), Error);
}

TEST_CASE("rope tables reproduce the MODEL.md Appendix A freq check values") {
  // Printed to 7 significant digits: relative bound 1e-6.
  const double plain[32] = {1, 0.7498942, 0.5623413, 0.4216965, 0.3162278, 0.2371374, 0.1778279,
                            0.1333521, 0.1, 0.07498942, 0.05623413, 0.04216965, 0.03162278,
                            0.02371374, 0.01778279, 0.01333521, 0.01, 0.007498942, 0.005623413,
                            0.004216965, 0.003162278, 0.002371374, 0.001778279, 0.001333521,
                            0.001, 0.0007498942, 0.0005623413, 0.0004216965, 0.0003162278,
                            0.0002371374, 0.0001778279, 0.0001333522};
  const double yarn[32] = {1, 0.687656, 0.4728708, 0.3251725, 0.2236068, 0.1537646, 0.1057371,
                           0.07271077, 0.05, 0.0343828, 0.02364354, 0.01625862, 0.01118034,
                           0.007688228, 0.005286857, 0.003635539, 0.002265625, 0.001396801,
                           0.0008496897, 0.000508082, 0.0002969778, 0.00016818, 9.086784e-05,
                           4.544423e-05, 1.953125e-05, 5.372312e-06, 3.694303e-06, 2.54041e-06,
                           1.746928e-06, 1.201286e-06, 8.260713e-07, 5.680529e-07};
  const YarnConfig y = flash_yarn();
  const RopeTable tp = make_rope_table(10000.0, kRopeDim, 1, nullptr);
  const RopeTable ty = make_rope_table(160000.0, kRopeDim, 1, &y);
  for (int i = 0; i < 32; ++i) {
    INFO("i = ", i);
    CHECK(std::fabs(tp.freq[i] - plain[i]) <= 1e-6 * plain[i]);
    CHECK(std::fabs(ty.freq[i] - yarn[i]) <= 1e-6 * yarn[i]);
  }
  // Position 0 is the identity rotation.
  for (int i = 0; i < 32; ++i) {
    CHECK(tp.fc[2 * i] == 1.0f);
    CHECK(tp.fc[2 * i + 1] == 0.0f);
  }
}
