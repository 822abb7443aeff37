// CUDA vs CPU: RMSNorm and per-head RMS (MODEL.md §4.2, §4.3).
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

TEST_CASE("rmsnorm and head_rms twins: y = w * (x * rsqrt(mean(x^2) + eps))") {
  Backends b;
  Rng rng(11);
  Store store;
  const int rows = 5, n = 512;
  std::vector<float> wv = rng.normals(n, 0.5f);
  for (bool bf16 : {false, true}) {
    const TensorView w = bf16 ? store.bf16("norm.weight", {n}, wv) : store.f32("norm.weight", {n}, wv);
    PairF x = put(b, rng.normals(static_cast<size_t>(rows) * n, 3.0f));
    PairF y = zeros(b, x.n);
    for (int s : {kCpu, kGpu}) b.at(s).rmsnorm(x[s], w, rows, n, 1e-6, y[s]);
    // f32 sum of squares vs the f64 oracle: ~1e-7 relative; bound 1e-6.
    check_close(bf16 ? "rmsnorm bf16 weight" : "rmsnorm f32 weight", get(b, y, kCpu), get(b, y, kGpu),
                1e-6, 1e-6);
  }
  PairF v = put(b, rng.normals(12 * 128, 0.01f));
  for (int s : {kCpu, kGpu}) b.at(s).head_rms(v[s], 12, 128, 1e-6);
  // Same chain as rmsnorm without a weight.
  check_close("head_rms", get(b, v, kCpu), get(b, v, kGpu), 1e-6, 1e-6);
}

}  // namespace dsv4::twin
