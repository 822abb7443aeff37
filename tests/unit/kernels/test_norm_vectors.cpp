// RMSNorm (MODEL.md §4.2) and per-head RMS (§4.3) against rmsnorm.json.
#include <doctest/doctest.h>

#include <random>

#include "kernels/cpu/norm.h"
#include "base/error.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

TEST_CASE("rmsnorm: y = w * (x * 1/sqrt(mean(x^2) + eps)) matches rmsnorm.json") {
  for (const VectorCase& c : load_cases("rmsnorm.json", "rmsnorm")) {
    SUBCASE(c.name.c_str()) {
      const VectorArray x = c.input("x");
      const std::vector<float> w = c.input("weight").f32();
      const int rows = static_cast<int>(x.dim(0)), n = c.param<int>("n");
      CpuWeightCache cache;
      std::vector<float> y(x.size());
      cpu_rmsnorm(cache, x.f32().data(), f32_view("weight", {n}, w), rows, n,
                  c.param<double>("eps"), y.data());
      // f64 expected vs f64-accumulated op rounded once: bounds from the vector file.
      compare_key(c, "y", y);
    }
  }
}

TEST_CASE("headrms: each head vector scaled by 1/sqrt(mean(q^2) + eps) matches rmsnorm.json") {
  for (const VectorCase& c : load_cases("rmsnorm.json", "headrms")) {
    SUBCASE(c.name.c_str()) {
      const VectorArray q_in = c.input("q");
      std::vector<float> q = q_in.f32();
      const int heads = c.param<int>("heads"), dim = c.param<int>("head_dim");
      cpu_head_rms(q.data(), static_cast<int>(q_in.dim(0)) * heads, dim, c.param<double>("eps"));
      compare_key(c, "q", q);  // bounds from the vector file
    }
  }
}

TEST_CASE("rmsnorm in place (y aliases x) is bit-identical to out of place") {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  const int rows = 3, n = 40;
  std::vector<float> x(rows * n), w(n);
  for (float& v : x) v = dist(gen);
  for (float& v : w) v = dist(gen);
  CpuWeightCache cache;
  const TensorView wv = f32_view("w", {n}, w);
  std::vector<float> y(x.size());
  cpu_rmsnorm(cache, x.data(), wv, rows, n, 1e-6, y.data());
  cpu_rmsnorm(cache, x.data(), wv, rows, n, 1e-6, x.data());
  CHECK(x == y);
}

TEST_CASE("rmsnorm refuses a weight whose length differs from the row width") {
  std::vector<float> x(8, 1.0f), w(7, 1.0f), y(8);
  CpuWeightCache cache;
  CHECK_THROWS_AS(cpu_rmsnorm(cache, x.data(), f32_view("bad.norm", {7}, w), 1, 8, 1e-6, y.data()),
                  Error);
}
