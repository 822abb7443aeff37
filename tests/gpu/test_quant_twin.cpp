// CUDA vs CPU: KV act_quant (§4.8), Hadamard (§4.11) and FP4 QAT (§4.10).
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

TEST_CASE("kv_act_quant twin: both variants, rope dims untouched (bit-exact)") {
  Backends b;
  Rng rng(13);
  const int rows = 4, dim = 512, rd = 64;
  std::vector<float> x = rng.normals(static_cast<size_t>(rows) * dim, 2.0f);
  x[7] = 0.0f;         // signed zero and tiny values through the floor
  x[8] = -0.0f;
  x[9] = 1e-30f;
  for (KvQuant variant : {KvQuant::clamp, KvQuant::e4m3}) {
    PairF v = put(b, x);
    for (int s : {kCpu, kGpu}) b.at(s).kv_act_quant(v[s], rows, dim, rd, variant);
    // Same scalar_formats.h primitives and exact power-of-two scaling: exact.
    check_close(variant == KvQuant::e4m3 ? "act_quant e4m3" : "act_quant clamp", get(b, v, kCpu),
                get(b, v, kGpu), 0, 0);
  }
}

TEST_CASE("hadamard_fp4 twin: butterfly of increasing stride, then FP4 (bit-exact)") {
  Backends b;
  Rng rng(14);
  const int vectors = 9, dim = 128;
  for (bool fp4 : {false, true}) {
    PairF v = put(b, rng.normals(static_cast<size_t>(vectors) * dim));
    for (int s : {kCpu, kGpu}) b.at(s).hadamard_fp4(v[s], vectors, dim, fp4);
    // Same f32 butterfly order (D9) and the same e2m1 rounding: exact.
    check_close(fp4 ? "hadamard+fp4" : "hadamard", get(b, v, kCpu), get(b, v, kGpu), 0, 0);
  }
}

}  // namespace dsv4::twin
