// A sparse sink attention problem of the twin tests (test_attention_twin.cpp: the decode
// kernel through CudaOps; test_attention_prefill_twin.cpp: the prefill kernel).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

struct AttentionCase {
  int rows, heads, dim, n_kv, width;
  std::vector<int32_t> idx;  // [rows, width]
  std::vector<float> sink;   // [heads]
  float q_sd;
};

// The case's seeded inputs on both backends: q ~ N(0, q_sd), kv ~ N(0, 1), the index
// rows, the sink as a stored F32 tensor, scale = dim^-0.5.
struct AttentionInputs {
  Store store;
  TensorView sink;
  size_t row_q;  // floats of one row of q (and o)
  PairF q, kv;
  PairI idx;
  float scale;
  AttentionInputs(Backends& b, const AttentionCase& c, uint64_t seed) {
    Rng rng(seed);
    sink = store.f32("attn_sink", {c.heads}, c.sink);
    row_q = static_cast<size_t>(c.heads) * c.dim;
    q = put(b, rng.normals(c.rows * row_q, c.q_sd));
    kv = put(b, rng.normals(static_cast<size_t>(c.n_kv) * c.dim));
    idx = put_i32(b, c.idx);
    scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  }
  AttentionInputs(const AttentionInputs&) = delete;  // sink points into store
  AttentionInputs& operator=(const AttentionInputs&) = delete;
};

// c's index rows widened to `wide` >= c.width entries with trailing -1 pads (law 3).
inline std::vector<int32_t> padded_index(const AttentionCase& c, int wide) {
  std::vector<int32_t> padded(static_cast<size_t>(c.rows) * wide, -1);
  for (int t = 0; t < c.rows; ++t)
    std::copy_n(c.idx.begin() + static_cast<size_t>(t) * c.width, c.width,
                padded.begin() + static_cast<size_t>(t) * wide);
  return padded;
}

}  // namespace dsv4::twin
