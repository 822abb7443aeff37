// Sparse sink attention (MODEL.md §4.20 with D12, §6.8 law 3) against sink_attention.json.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "kernels/cpu/attention.h"
#include "base/error.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

TEST_CASE("sink attention: softmax over valid entries with the sink in max and denominator") {
  for (const VectorCase& c : load_cases("sink_attention.json", "sink_attention")) {
    SUBCASE(c.name.c_str()) {
      const VectorArray q = c.input("q"), idx = c.input("idx");
      const int rows = static_cast<int>(q.dim(0)), heads = c.param<int>("heads"),
                dim = c.param<int>("head_dim"), width = static_cast<int>(idx.dim(1));
      const std::vector<float> sink = c.input("sink").f32();
      std::vector<float> o(q.size());
      cpu_sink_attention(q.f32().data(), rows, heads, dim, c.input("kv_src").f32().data(),
                         idx.i32().data(), width, f32_view("attn_sink", {heads}, sink),
                         c.param<float>("scale"), o.data());
      // f64 expected vs f64 chains rounded once to f32: bounds from the vector file.
      compare_key(c, "o", o);
    }
  }
}

TEST_CASE("sink attention: extra -1 columns anywhere in the row change no bit (pad inertness)") {
  const int rows = 3, heads = 2, dim = 16, n_src = 12, width = 5;
  std::mt19937 gen(1234);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> q(rows * heads * dim), kv(n_src * dim), sink = {0.5f, -1.25f};
  for (float& v : q) v = dist(gen);
  for (float& v : kv) v = dist(gen);
  const std::vector<int32_t> idx = {0, 1, 2, -1, -1, 3, 4, 5, 6, 11, 7, -1, 8, 9, 10};
  const TensorView sv = f32_view("attn_sink", {heads}, sink);
  std::vector<float> base(q.size()), padded(q.size());
  cpu_sink_attention(q.data(), rows, heads, dim, kv.data(), idx.data(), width, sv, 0.25f,
                     base.data());
  // Same entries in the same order, -1 columns inserted before, between and after.
  const int wide = 9;
  std::vector<int32_t> idx_wide;
  for (int t = 0; t < rows; ++t) {
    idx_wide.push_back(-1);
    for (int k = 0; k < width; ++k) {
      idx_wide.push_back(idx[t * width + k]);
      if (k == 1) idx_wide.push_back(-1);
    }
    idx_wide.insert(idx_wide.end(), wide - 7, -1);
  }
  REQUIRE(idx_wide.size() == static_cast<size_t>(rows * wide));
  cpu_sink_attention(q.data(), rows, heads, dim, kv.data(), idx_wide.data(), wide, sv, 0.25f,
                     padded.data());
  CHECK(std::memcmp(base.data(), padded.data(), base.size() * sizeof(float)) == 0);
}

TEST_CASE("sink attention refuses a sink whose length is not the head count") {
  std::vector<float> q(8, 1.0f), kv(4, 1.0f), o(8), sink(3, 0.0f);
  const int32_t idx[] = {0};
  CHECK_THROWS_AS(cpu_sink_attention(q.data(), 1, 2, 4, kv.data(), idx, 1,
                                     f32_view("layers.0.attn.attn_sink", {3}, sink), 0.5f,
                                     o.data()),
                  Error);
}
