// CUDA vs CPU: sparse sink attention (MODEL.md §4.20 with D12), -1 pads, row independence.
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

TEST_CASE("sink_attention twin: sink in the max and the denominator, -1 pads inert") {
  Backends b;
  Rng rng(51);
  Store store;
  const int rows = 4, heads = 4, dim = 128, n_kv = 50, width = 20;
  const TensorView sink = store.f32("attn_sink", {heads}, {0.5f, 8.0f, -2.0f, 3.0f});
  PairF q = put(b, rng.normals(static_cast<size_t>(rows) * heads * dim, 0.1f));
  PairF kv = put(b, rng.normals(static_cast<size_t>(n_kv) * dim));
  std::vector<int32_t> idx(static_cast<size_t>(rows) * width);
  for (int t = 0; t < rows; ++t)
    for (int k = 0; k < width; ++k) {
      // Row t keeps 5 + 5t distinct entries (row 0 has padding inside and at the end).
      const bool valid = k < 5 + 5 * t && !(t == 0 && k == 2);
      idx[t * width + k] = valid ? (k * 7 + t * 3) % n_kv : -1;
    }
  PairI ix = put_i32(b, idx);
  const float scale = 1.0f / std::sqrt(128.0f);
  PairF o = zeros(b, q.n);
  for (int s : {kCpu, kGpu}) b.at(s).sink_attention(q[s], rows, heads, dim, kv[s], ix[s], width, sink, scale, o[s]);
  // f32 chains (128-term logits, softmax over <= 20) vs f64 oracle: ~1e-6; bound 1e-5.
  check_close("sink_attention", get(b, o, kCpu), get(b, o, kGpu), 1e-5, 1e-5);
  PairF one = zeros(b, q.n);
  for (int t = 0; t < rows; ++t)
    b.gpu->sink_attention(q[kGpu] + t * heads * dim, 1, heads, dim, kv[kGpu], ix[kGpu] + t * width, width,
                          sink, scale, one[kGpu] + t * heads * dim);
  check_bitwise("sink_attention rows vs single rows", get(b, o, kGpu), get(b, one, kGpu));
}

}  // namespace dsv4::twin
