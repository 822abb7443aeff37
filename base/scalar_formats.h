// The scalar number formats, once for host and device code (host + device inline): the
// bit-exact decoders of the stored formats (CHECKPOINT.md §3.1-§3.5), read by the
// checkpoint codecs, the CPU reference and the CUDA kernels alike, and the quantizer
// primitives of MODEL.md §3.1, so both backends decode and round identically.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DSV4_HD __host__ __device__ inline
#else
#define DSV4_HD inline
#endif

namespace dsv4 {

DSV4_HD uint32_t f32_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
DSV4_HD float f32_from_bits(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// ---- decoders (CHECKPOINT.md §3), integer bit operations only ----

// §3.1 BF16: f32 bits = u16 << 16 (exact).
DSV4_HD float bf16_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// §3.2 E4M3FN: subnormal m * 2^-9, normal (1 + m/8) 2^(e-7), 0x7F / 0xFF NaN.
DSV4_HD float e4m3_to_f32(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t e = (code >> 3) & 0xFu, m = code & 0x7u;
  if (e == 15 && m == 7) return f32_from_bits(0x7FC00000u);
  if (e == 0) return f32_from_bits(sign | f32_bits(static_cast<float>(m) * 0.001953125f));
  return f32_from_bits(sign | ((e - 7 + 127) << 23) | (m << 20));
}

// §3.3 E8M0: 2^(e-127); code 0 is the f32 subnormal 2^-127 exactly (C6); 0xFF NaN.
DSV4_HD float e8m0_to_f32(uint8_t code) {
  if (code == 0xFF) return f32_from_bits(0x7FC00000u);
  if (code == 0) return f32_from_bits(0x00400000u);
  return f32_from_bits(static_cast<uint32_t>(code) << 23);
}

// §3.5 E2M1 nibble: magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}, bit 3 negates (0x8 -> -0.0,
// C5). Built as f32 bits: idx = e m >= 2 is (1 + m/2) 2^(e-1), i.e. exponent e - 1 + 127
// and mantissa bit m, = (idx << 22) + (126 << 23); idx 1 is 0.5 = 126 << 23; idx 0 is 0.
DSV4_HD float e2m1_to_f32(uint8_t nibble) {
  const uint32_t idx = nibble & 0x7u;
  const uint32_t mag = idx < 2 ? idx * (126u << 23) : (idx << 22) + (126u << 23);
  return f32_from_bits((static_cast<uint32_t>(nibble & 0x8u) << 28) | mag);
}

// §3.5: nibble of logical element c of a packed FP4 row (even c low nibble, odd c high).
DSV4_HD uint8_t fp4_nibble(const uint8_t* packed_row, int64_t c) {
  const uint8_t b = packed_row[c / 2];
  return (c & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0xF);
}

// ---- quantizer primitives (MODEL.md §3.1) ----

// pow2ceil (the reference's fast_round_scale): smallest power of two >= v for normal
// finite v > 0, from the binary32 bits.
DSV4_HD float pow2ceil(float v) {
  const uint32_t bits = f32_bits(v);
  const int e = static_cast<int>((bits >> 23) & 0xFFu) - 127;
  const uint32_t m = bits & 0x7FFFFFu;
  const int k = e + (m != 0 ? 1 : 0);
  return f32_from_bits(static_cast<uint32_t>(k + 127) << 23);
}

// bf16 RNE of a binary32 (NaN stays NaN).
DSV4_HD float bf16_round(float x) {
  uint32_t b = f32_bits(x);
  if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu)) return x;
  b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
  return f32_from_bits(b);
}

// Nearest e4m3fn value of v (|v| <= 448 by the callers' clamp), ties to even, sign of
// zero kept (code 0x80 for a negative value that rounds to zero).
DSV4_HD float e4m3_round(float v) {
  const float a = std::fabs(v);
  float r;
  if (a < 0.015625f) {                     // below 2^-6: subnormal step 2^-9
    r = std::rint(a * 512.0f) * 0.001953125f;
  } else {
    int e;
    std::frexp(a, &e);                     // a = f * 2^e, f in [0.5, 1)
    const float p = std::ldexp(1.0f, e - 1);  // 2^floor(log2 a)
    const float q = std::rint((a / p - 1.0f) * 8.0f);  // exact argument, RNE
    r = (1.0f + q * 0.125f) * p;           // q == 8 carries into the next binade
  }
  return std::copysign(r, v);
}

// e4m3fn byte of e4m3_round(v)'s value (for per-128 activation codes, §4.9).
DSV4_HD uint8_t e4m3_code_of(float rounded) {
  const uint8_t sign = std::signbit(rounded) ? 0x80 : 0x00;
  const float a = std::fabs(rounded);
  if (a < 0.015625f) return static_cast<uint8_t>(sign | static_cast<uint8_t>(a * 512.0f));
  int e;
  const float f = std::frexp(a, &e);       // a = f * 2^e
  const int exp_field = e - 1 + 7;
  const int mant = static_cast<int>((f * 2.0f - 1.0f) * 8.0f);
  return static_cast<uint8_t>(sign | (exp_field << 3) | mant);
}

// Nearest e2m1 value of v (|v| <= 6 by the callers' clamp), ties to the even code:
// 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4; sign of zero kept.
DSV4_HD float e2m1_round(float v) {
  const float a = std::fabs(v);
  float r;
  if (a <= 0.25f) r = 0.0f;
  else if (a < 0.75f) r = 0.5f;
  else if (a <= 1.25f) r = 1.0f;
  else if (a < 1.75f) r = 1.5f;
  else if (a <= 2.5f) r = 2.0f;
  else if (a < 3.5f) r = 3.0f;
  else if (a <= 5.0f) r = 4.0f;
  else r = 6.0f;
  return std::copysign(r, v);
}

// Constants of the activation quantizers (§3.1): multiplication by the f32 reciprocal.
constexpr float kInv448 = 1.0f / 448.0f;
constexpr float kInv6 = 1.0f / 6.0f;

}  // namespace dsv4
