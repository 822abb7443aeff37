// Activation quantizers (MODEL.md §4.8-§4.11, D1, D9) against quant.json, and the
// Hadamard transform's orthonormality.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>

#include "kernels/cpu/quant.h"
#include "base/scalar_formats.h"
#include "model/codecs.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

// e2m1 nibble of an exactly representable value (bit 3 sign; magnitudes §3.1 in code order).
uint8_t e2m1_nibble_of(float value) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  uint8_t code = 0xFF;
  for (uint8_t m = 0; m < 8; ++m)
    if (std::fabs(value) == magnitudes[m]) code = m;
  REQUIRE_MESSAGE(code != 0xFF, "value " << value << " is not on the e2m1 grid");
  return static_cast<uint8_t>(code | (std::signbit(value) ? 0x8 : 0x0));
}

}  // namespace

TEST_CASE("act_quant (group 64, dims [0,448)): E4M3 and ClampOnly variants and scales are exact (quant.json)") {
  for (const VectorCase& c : load_cases("quant.json", "act_quant")) {
    SUBCASE(c.name.c_str()) {
      const std::vector<float> v = c.input("v").f32();
      const int dim = c.param<int>("dim"), n_nope = c.param<int>("n_nope"),
                group = c.param<int>("group");
      std::vector<float> e4m3 = v, clamp = v;
      cpu_kv_act_quant(e4m3.data(), 1, dim, dim - n_nope, KvQuant::e4m3);
      cpu_kv_act_quant(clamp.data(), 1, dim, dim - n_nope, KvQuant::clamp);
      compare_key(c, "e4m3", e4m3);  // exact keys
      compare_key(c, "clamp", clamp);
      std::vector<float> scales;
      for (int g = 0; g < n_nope; g += group)
        scales.push_back(cpu_group_scale(v.data() + g, group, c.param<float>("amax_floor"), kInv448));
      compare_key(c, "scales", scales);
    }
  }
}

TEST_CASE("act_quant_fp8 (per 128): e4m3fn codes, power-of-two scales and dequant are exact (quant.json)") {
  for (const VectorCase& c : load_cases("quant.json", "act_quant_fp8")) {
    SUBCASE(c.name.c_str()) {
      const std::vector<float> x = c.input("x").f32();
      const int rows = c.param<int>("rows"), k = c.param<int>("K"), block = c.param<int>("block");
      std::vector<uint8_t> codes(rows * k);
      std::vector<float> scales(rows * k / block), dequant(rows * k);
      for (int r = 0; r < rows; ++r)
        cpu_act_quant_fp8(x.data() + r * k, k, codes.data() + r * k, scales.data() + r * k / block);
      for (int i = 0; i < rows * k; ++i) dequant[i] = e4m3_to_f32(codes[i]) * scales[i / block];
      compare_key(c, "codes", codes);  // exact keys
      compare_key(c, "scales", scales);
      compare_key(c, "dequant", dequant);
    }
  }
}

TEST_CASE("fp4_act_quant (group 32): e2m1 RNE ties, scales and nibbles are exact (quant.json)") {
  for (const VectorCase& c : load_cases("quant.json", "fp4_act_quant")) {
    SUBCASE(c.name.c_str()) {
      const std::vector<float> v = c.input("v").f32();
      const int rows = c.param<int>("rows"), dim = c.param<int>("dim"),
                group = c.param<int>("group");
      std::vector<float> out = v, scales;
      for (int r = 0; r < rows; ++r) cpu_fp4_act_quant(out.data() + r * dim, dim);
      for (int g = 0; g < rows * dim; g += group)
        scales.push_back(cpu_group_scale(v.data() + g, group, c.param<float>("amax_floor"), kInv6));
      std::vector<uint8_t> codes;
      for (int i = 0; i < rows * dim; ++i) codes.push_back(e2m1_nibble_of(out[i] / scales[i / group]));
      compare_key(c, "out", out);  // exact keys
      compare_key(c, "scales", scales);
      compare_key(c, "codes", codes);
    }
  }
}

TEST_CASE("hadamard: fl32(dim^-0.5) * Sylvester H . v (natural order) matches quant.json") {
  for (const VectorCase& c : load_cases("quant.json", "hadamard")) {
    SUBCASE(c.name.c_str()) {
      const VectorArray v = c.input("v");
      const int dim = c.param<int>("dim");
      std::vector<float> out = v.f32();
      cpu_hadamard_fp4(out.data(), static_cast<int>(v.dim(0)), dim, false);
      compare_key(c, "out", out);  // f32 butterfly vs f64: bounds from the vector file
    }
  }
}

TEST_CASE("hadamard is orthonormal: H e_j = scale * (-1)^popcount(i&j), H H^T = I") {
  const int dim = 128;
  const float scale = 0.0883883461356163f;  // fl32(128^-0.5), MODEL.md Appendix A
  std::vector<std::vector<float>> cols(dim);
  for (int j = 0; j < dim; ++j) {
    cols[j].assign(dim, 0.0f);
    cols[j][j] = 1.0f;
    cpu_hadamard(cols[j].data(), dim);
    for (int i = 0; i < dim; ++i) {
      const float want = (std::popcount(static_cast<unsigned>(i & j)) % 2) ? -scale : scale;
      if (cols[j][i] != want) FAIL_CHECK("H[", i, "][", j, "] = ", cols[j][i], ", want ", want);
    }
  }
  for (int a = 0; a < dim; ++a)
    for (int b = 0; b < dim; ++b) {
      double dot = 0.0;
      for (int i = 0; i < dim; ++i) dot += double(cols[a][i]) * cols[b][i];
      // 128 * fl32(2^-3.5)^2 = 1 - 3e-8: identity within 1e-6.
      if (std::fabs(dot - (a == b ? 1.0 : 0.0)) > 1e-6) FAIL_CHECK("(H H^T)[", a, "][", b, "] = ", dot);
    }
}

TEST_CASE("hadamard_fp4 with fp4 = Hadamard then fp4_act_quant on each vector") {
  std::vector<float> v(2 * 128);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + 1.0f);
  std::vector<float> fused = v, staged = v;
  cpu_hadamard_fp4(fused.data(), 2, 128, true);
  for (int r = 0; r < 2; ++r) {
    cpu_hadamard(staged.data() + r * 128, 128);
    cpu_fp4_act_quant(staged.data() + r * 128, 128);
  }
  CHECK(fused == staged);
  CHECK(fused != v);
}
