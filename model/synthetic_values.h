// The value rules of synthetic checkpoints (CHECKPOINT.md §3.8), as scalar functions
// compiled for host and device alike, so the checkpoint writer, the host weight generator
// and the CUDA weight generator produce the same bytes from one definition:
//   - a tensor's f32 masters are a counter-based stream: element i of the tensor is the
//     (i+1)-th SplitMix64 output of state FNV-1a-64(name) xor seed, so any element is
//     computed on its own (rule 3);
//   - the writer encoders of rules 2 (E4M3), 4 (FP8 128x128 blocks), 5 (E2M1), 6 (MXFP4)
//     and 7 (NVFP4), one scale or code at a time.
// Device code must not contract a*b+c into an FMA where the host rounds twice: the master
// and the NVFP4 quotient use explicitly rounded operations.
#pragma once
#include <cstdint>

#include "base/scalar_formats.h"

namespace dsv4::synth {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr int kFp8Block = 128;   // §3.4 block edge
constexpr int kMxGroup = 32;     // §3.6 group along the input dim
constexpr int kNvGroup = 16;     // §3.7 group along the input dim
constexpr float kE4m3Max = 448.0f;
constexpr float kE2m1Max = 6.0f;
constexpr uint8_t kE4m3One = 0x38;  // e4m3 code of 1.0

DSV4_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
DSV4_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// SplitMix64 output number i (0-based) of a stream started at `state` (§3.8 rule 3).
DSV4_HD uint64_t splitmix_at(uint64_t state, uint64_t i) {
  uint64_t z = state + (i + 1) * kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
DSV4_HD double unit_at(uint64_t state, uint64_t i) {  // [0, 1), 53 bits
  return static_cast<double>(splitmix_at(state, i) >> 11) * 0x1.0p-53;
}
// Master i of a tensor whose values are uniform in [lo, hi): f32(lo + (hi - lo) * u).
DSV4_HD float master_at(uint64_t state, uint64_t i, double lo, double hi) {
  return static_cast<float>(add_rn(lo, mul_rn(hi - lo, unit_at(state, i))));
}

// Smallest integer k with amax <= limit * 2^k (k = 0 for amax = 0), clamped to
// [-127, 127] (rules 4, 6, 7). The estimate is corrected with exact comparisons, so the
// result does not depend on the platform's log2.
DSV4_HD int pow2_cover(double amax, double limit) {
  if (amax == 0) return 0;
  int k = static_cast<int>(std::ceil(std::log2(amax / limit)));
  while (std::ldexp(limit, k) < amax) ++k;
  while (std::ldexp(limit, k - 1) >= amax) --k;
  return k < -127 ? -127 : (k > 127 ? 127 : k);
}

// Rule 2 for a finite y: nearest value of min(|y|, 448), ties to the even code, never -0.
DSV4_HD uint8_t e4m3_encode(float y) {
  const float a = std::fabs(y) < kE4m3Max ? std::fabs(y) : kE4m3Max;
  const uint8_t code = e4m3_code_of(e4m3_round(a));
  return (y < 0 && code != 0) ? static_cast<uint8_t>(code | 0x80) : code;
}

// Rule 5: E2M1 code of y, ties to the even mantissa, saturating at 6, never 0x8. Takes
// f64 so rule 7's f64 quotient is rounded only once.
DSV4_HD uint8_t e2m1_encode(double y) {
  const double a = std::fabs(y);
  uint8_t index;
  if (a <= 0.25) index = 0;
  else if (a < 0.75) index = 1;
  else if (a <= 1.25) index = 2;
  else if (a < 1.75) index = 3;
  else if (a <= 2.5) index = 4;
  else if (a < 3.5) index = 5;
  else if (a <= 5.0) index = 6;
  else index = 7;
  return (y < 0 && index != 0) ? static_cast<uint8_t>(index | 0x8) : index;
}

// Rule 4: the E8M0 code of a 128x128 block with max |w| = amax, and one element's code.
DSV4_HD int fp8_block_exponent(float amax) { return pow2_cover(amax, kE4m3Max); }
DSV4_HD uint8_t e8m0_code(int k) { return static_cast<uint8_t>(k + 127); }
DSV4_HD uint8_t fp8_code(float w, int k) { return e4m3_encode(std::ldexp(w, -k)); }

// Rule 6: a 32-group's exponent and one element's nibble.
DSV4_HD int mxfp4_group_exponent(float amax) { return pow2_cover(amax, kE2m1Max); }
DSV4_HD uint8_t mxfp4_nibble(float w, int k) { return e2m1_encode(std::ldexp(w, -k)); }

// Rule 7: s2 = 2^m covering the tensor amax with 6 * 448, m clamped to f32's normal
// range [-126, 127] so s2 is a normal f32 (the rule leaves tiny tensors open).
DSV4_HD double nvfp4_scale_2(float tensor_amax) {
  int m = pow2_cover(tensor_amax, 6.0 * kE4m3Max);
  m = m < -126 ? -126 : (m > 127 ? 127 : m);
  return std::ldexp(1.0, m);
}
// Rule 7: the smallest positive finite e4m3 code v with 6 v s2 >= amax (codes 0x01..0x7E
// increase with their value, so this is a partition point); 1.0 for an all-zero group.
DSV4_HD uint8_t nvfp4_block_code(float amax, double s2) {
  if (!(amax > 0)) return kE4m3One;
  int lo = 0x01, hi = 0x7E;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (mul_rn(6.0 * e4m3_to_f32(static_cast<uint8_t>(mid)), s2) >= amax) hi = mid;
    else lo = mid + 1;
  }
  return static_cast<uint8_t>(lo);
}
DSV4_HD uint8_t nvfp4_nibble(float w, uint8_t block_code, double s2) {
  const double d = mul_rn(e4m3_to_f32(block_code), s2);  // exact in f64
  return e2m1_encode(static_cast<double>(w) / d);
}

}  // namespace dsv4::synth
