#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>

#include "base/scalar_formats.h"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kKvGroup = 64;      // §4.8
constexpr int kFp8Block = 128;    // §4.9
constexpr int kFp4Group = 32;     // §4.10
constexpr float kE4m3Max = 448.0f;
constexpr float kE2m1Max = 6.0f;
constexpr float kKvAmaxFloor = 1e-4f;                 // §4.8, §4.9
const float kFp4AmaxFloor = std::ldexp(6.0f, -126);   // §4.10: 6 * 2^-126

}  // namespace

float cpu_group_scale(const float* x, int n, float amax_floor, float inv_max) {
  float amax = amax_floor;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return pow2ceil(amax * inv_max);
}

void cpu_kv_act_quant(float* v, int rows, int dim, int rd, KvQuant variant) {
  const int nope = dim - rd;
  DSV4_CHECK(nope >= 0 && nope % kKvGroup == 0, "dim=", dim, " rd=", rd);
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < nope; g += kKvGroup) {
      float* x = v + static_cast<int64_t>(r) * dim + g;
      const float s = cpu_group_scale(x, kKvGroup, kKvAmaxFloor, kInv448);
      for (int i = 0; i < kKvGroup; ++i) {
        const float q = std::clamp(x[i] / s, -kE4m3Max, kE4m3Max);
        x[i] = (variant == KvQuant::e4m3 ? e4m3_round(q) : q) * s;
      }
    }
  }
}

void cpu_act_quant_fp8(const float* x, int n, uint8_t* codes, float* scales) {
  DSV4_CHECK(n % kFp8Block == 0, "n=", n);
  for (int b = 0; b < n / kFp8Block; ++b) {
    const float* xb = x + b * kFp8Block;
    const float s = cpu_group_scale(xb, kFp8Block, kKvAmaxFloor, kInv448);
    scales[b] = s;
    for (int i = 0; i < kFp8Block; ++i)
      codes[b * kFp8Block + i] =
          e4m3_code_of(e4m3_round(std::clamp(xb[i] / s, -kE4m3Max, kE4m3Max)));
  }
}

void cpu_fp4_act_quant(float* v, int n) {
  DSV4_CHECK(n % kFp4Group == 0, "n=", n);
  for (int g = 0; g < n; g += kFp4Group) {
    float* x = v + g;
    const float s = cpu_group_scale(x, kFp4Group, kFp4AmaxFloor, kInv6);
    for (int i = 0; i < kFp4Group; ++i)
      x[i] = e2m1_round(std::clamp(x[i] / s, -kE2m1Max, kE2m1Max)) * s;
  }
}

void cpu_hadamard(float* v, int dim) {
  DSV4_CHECK(dim > 0 && (dim & (dim - 1)) == 0, "Hadamard dim=", dim);
  for (int stride = 1; stride < dim; stride *= 2) {
    for (int base = 0; base < dim; base += 2 * stride) {
      for (int j = base; j < base + stride; ++j) {
        const float a = v[j], b = v[j + stride];
        v[j] = a + b;
        v[j + stride] = a - b;
      }
    }
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  for (int j = 0; j < dim; ++j) v[j] *= scale;
}

void cpu_hadamard_fp4(float* v, int vectors, int dim, bool fp4) {
  for (int i = 0; i < vectors; ++i) {
    float* x = v + static_cast<int64_t>(i) * dim;
    cpu_hadamard(x, dim);
    if (fp4) cpu_fp4_act_quant(x, dim);
  }
}

}  // namespace dsv4
