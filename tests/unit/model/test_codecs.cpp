// Codecs of CHECKPOINT.md §3: every code of every format against the spec formulas,
// hand-worked FP4 packings, encoder ties and round trips.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/codecs.h"
#include "base/error.h"
#include "tests/test_views.h"

using namespace dsv4;
using dsv4::test::byte_view;
using dsv4::test::fp4_view;

namespace {

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Same value, or both NaN; signed zeros must agree too.
bool same_value(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// Uniform masters in [-amp, amp) from a seeded generator.
std::vector<float> random_matrix(uint64_t seed, int64_t n, float amp) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-amp, amp);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& x : w) x = u(gen);
  return w;
}

}  // namespace

TEST_CASE(
    "E4M3FN: all 256 codes decode to (-1)^s (1 + m/8) 2^(e-7), subnormals m 2^-9, 0x7F/0xFF NaN "
    "(§3.2)") {
  for (int code = 0; code < 256; ++code) {
    const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
    double expected;
    if (e == 15 && m == 7)
      expected = NAN;
    else if (e == 0)
      expected = std::ldexp(static_cast<double>(m), -9);
    else
      expected = std::ldexp(static_cast<double>(8 + m), e - 10);  // (1 + m/8) 2^(e-7)
    if (s) expected = -expected;
    INFO("code ", code);
    CHECK(same_value(e4m3_to_f32(static_cast<uint8_t>(code)), static_cast<float>(expected)));
  }
  CHECK(e4m3_to_f32(0x7E) == 448.0f);
  CHECK(e4m3_to_f32(0xFE) == -448.0f);
  CHECK(e4m3_to_f32(0x08) == 0.015625f);
  CHECK(e4m3_to_f32(0x01) == 0.001953125f);
  CHECK(e4m3_to_f32(0x38) == 1.0f);
  CHECK(std::signbit(e4m3_to_f32(0x80)));
}

TEST_CASE(
    "E8M0: all 256 codes decode to 2^(e-127), code 0 to the f32 subnormal 2^-127, 0xFF NaN (§3.3, "
    "C6)") {
  for (int code = 0; code < 255; ++code) {
    INFO("code ", code);
    CHECK(e8m0_to_f32(static_cast<uint8_t>(code)) ==
          static_cast<float>(std::ldexp(1.0, code - 127)));
  }
  CHECK(std::isnan(e8m0_to_f32(0xFF)));
  CHECK(bits_of(e8m0_to_f32(0x00)) == 0x00400000u);  // not 0 (the e << 23 shortcut)
  CHECK(bits_of(e8m0_to_f32(0x01)) == 0x00800000u);
  CHECK(e8m0_to_f32(127) == 1.0f);
  CHECK(e8m0_to_f32(254) == std::ldexp(1.0f, 127));
}

TEST_CASE("E2M1: all 16 nibbles, 0x8 is -0.0 (§3.5, C5)") {
  const float expected[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int n = 0; n < 16; ++n) {
    INFO("nibble ", n);
    CHECK(same_value(e2m1_to_f32(static_cast<uint8_t>(n)), expected[n]));
  }
  CHECK(std::signbit(e2m1_to_f32(0x8)));
}

TEST_CASE("FP4 nibble order: even c low nibble, odd c high nibble (§3.5)") {
  const uint8_t row[2] = {0x21, 0xF7};
  CHECK(fp4_nibble(row, 0) == 0x1);
  CHECK(fp4_nibble(row, 1) == 0x2);
  CHECK(fp4_nibble(row, 2) == 0x7);
  CHECK(fp4_nibble(row, 3) == 0xF);
}

TEST_CASE("BF16: u16 << 16 decode and RNE encode with ties to even (§3.1, §3.8 rule 1)") {
  CHECK(bf16_to_f32(0x3F80) == 1.0f);
  CHECK(bf16_to_f32(0xC000) == -2.0f);
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie, even stays
  CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie, odd rounds up
  CHECK(f32_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)) == 0x3F81);
  CHECK(round_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 1.015625f);
  CHECK(std::isnan(round_to_bf16(NAN)));
  CHECK_THROWS_AS(f32_to_bf16(NAN), Error);
}

TEST_CASE(
    "E2M1 encoder: ties 0.25 1.25 2.5 5 go down, 0.75 1.75 3.5 go up, saturate at 6, no -0 (§3.8 "
    "rule 5)") {
  CHECK(encode_e2m1(0.25f) == 0);
  CHECK(encode_e2m1(0.75f) == 2);
  CHECK(encode_e2m1(1.25f) == 2);
  CHECK(encode_e2m1(1.75f) == 4);
  CHECK(encode_e2m1(2.5f) == 4);
  CHECK(encode_e2m1(3.5f) == 6);
  CHECK(encode_e2m1(5.0f) == 6);
  CHECK(encode_e2m1(std::nextafter(0.25f, 1.0f)) == 1);
  CHECK(encode_e2m1(std::nextafter(5.0f, 6.0f)) == 7);
  CHECK(encode_e2m1(7.0f) == 7);
  CHECK(encode_e2m1(1e30f) == 7);
  CHECK(encode_e2m1(-0.75f) == 0xA);
  CHECK(encode_e2m1(-6.0f) == 0xF);
  CHECK(encode_e2m1(-0.25f) == 0);  // rounds to zero: the writer never emits 0x8
  CHECK(encode_e2m1(-0.0f) == 0);
  CHECK_THROWS_AS(encode_e2m1(NAN), Error);
}

TEST_CASE("E4M3 encoder: midpoints go to the even code, clamp at 448, no -0 (§3.8 rule 2)") {
  CHECK(encode_e4m3(1.0625f) == 0x38);  // between 1.0 (0x38) and 1.125 (0x39)
  CHECK(encode_e4m3(1.1875f) == 0x3A);  // between 1.125 (0x39) and 1.25 (0x3A)
  CHECK(encode_e4m3(std::nextafter(1.0625f, 2.0f)) == 0x39);
  CHECK(encode_e4m3(432.0f) == 0x7E);                       // between 416 (0x7D) and 448 (0x7E)
  CHECK(encode_e4m3(std::ldexp(1.0f, -10)) == 0x00);        // between 0 and 2^-9
  CHECK(encode_e4m3(3 * std::ldexp(1.0f, -10)) == 0x02);    // between 2^-9 and 2^-8
  CHECK(encode_e4m3(7.5f * std::ldexp(1.0f, -9)) == 0x08);  // carries into the min normal
  CHECK(encode_e4m3(1.875f) == 0x3F);                       // exact: (0 + 7) << 3 | 7
  CHECK(encode_e4m3(0.9375f) == 0x37);                      // exact: (-1 + 7) << 3 | 7
  CHECK(encode_e4m3(0.96875f) == 0x38);  // between 0.9375 (0x37) and 1.0 (0x38), q = 8 carries
  CHECK(encode_e4m3(500.0f) == 0x7E);
  CHECK(encode_e4m3(-1000.0f) == 0xFE);
  CHECK(encode_e4m3(-1.0625f) == 0xB8);
  CHECK(encode_e4m3(-std::ldexp(1.0f, -11)) == 0x00);
  CHECK_THROWS_AS(encode_e4m3(INFINITY), Error);
}

TEST_CASE("decode(encode(decode(x))) == decode(x) for every finite E4M3 code and E2M1 nibble") {
  for (int code = 0; code < 256; ++code) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(code));
    if (std::isnan(v)) continue;
    INFO("code ", code);
    CHECK(e4m3_to_f32(encode_e4m3(v)) == v);  // -0 re-encodes as +0: equal by value
  }
  for (int n = 0; n < 16; ++n) {
    const float v = e2m1_to_f32(static_cast<uint8_t>(n));
    CHECK(e2m1_to_f32(encode_e2m1(v)) == v);
  }
}

TEST_CASE("MXFP4 pack: hand-worked 2 x 32 matrix (§3.6, §3.8 rule 6)") {
  std::vector<float> w(64, 0.0f);  // [2, 32]
  // Row 0: amax 3 -> k = -1 (3 <= 6 * 2^-1, 3 > 6 * 2^-2), scale code 126; W / 2^k = 2W:
  // 1.5 -> 3 (idx 5), -0.25 -> -0.5 (0x9), 0.5 -> 1 (idx 2), 3 -> 6 (idx 7), -1 -> -2 (0xC).
  w[0] = 1.5f;
  w[1] = -0.25f;
  w[2] = 0.5f;
  w[3] = 3.0f;
  w[31] = -1.0f;
  // Row 1: amax 0.1 -> k = -5 (0.1 <= 0.1875, 0.1 > 0.09375), code 122; 0.1 * 32 = 3.2 -> 3 (idx
  // 5).
  w[32] = 0.1f;
  const Fp4Encoded enc = encode_mxfp4(w.data(), 2, 32);
  const std::vector<uint8_t> packed = {
      0x95, 0x72, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0,  // (nib1 << 4) | nib0 ...
      0x05, 0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK(enc.packed == packed);
  CHECK(enc.scales == std::vector<uint8_t>{126, 122});
  CHECK(enc.scale_2 == 1.0f);

  const std::vector<float> dec = decode_fp4_linear(fp4_view("w", ExpertRecipe::mxfp4, 2, 32, enc));
  CHECK(dec[0] == 1.5f);
  CHECK(dec[1] == -0.25f);
  CHECK(dec[2] == 0.5f);
  CHECK(dec[3] == 3.0f);
  CHECK(dec[31] == -1.0f);
  CHECK(dec[32] == 0.09375f);  // 3 * 2^-5
  CHECK(dec[33] == 0.0f);
}

TEST_CASE("NVFP4 pack: hand-worked 2 x 16 matrix with a power-of-two s2 (§3.7, §3.8 rule 7)") {
  std::vector<float> w(32, 0.0f);  // [2, 16]
  w[0] = 1.5f;
  w[1] = -0.25f;
  w[2] = 0.5f;
  w[3] = 3.0f;
  w[15] = -1.0f;
  w[16] = 0.7f;
  w[17] = 0.2f;
  const Fp4Encoded enc = encode_nvfp4(w.data(), 2, 16);
  // Tensor amax 3: m = -9 (3 <= 2688 * 2^-9 = 5.25, 3 > 2.625), s2 = 2^-9.
  CHECK(enc.scale_2 == 0.001953125f);
  // Row 0: block amax 3 needs v >= 3 * 2^9 / 6 = 256 -> code 0x78 (2^8); d = 0.5, so
  // the nibbles are those of 2W: 0x5, 0x9, 0x2, 0x7, ..., 0xC.
  // Row 1: block amax 0.7 needs v >= 59.73 -> 60 = 1.875 * 2^5, code (12 << 3) | 7 = 0x67;
  // d = 60 * 2^-9 = 0.1171875: 0.7 / d = 5.97 -> 6 (idx 7), 0.2 / d = 1.71 -> 1.5 (idx 3).
  CHECK(enc.scales == std::vector<uint8_t>{0x78, 0x67});
  const std::vector<uint8_t> packed = {0x95, 0x72, 0, 0, 0, 0, 0, 0xC0, 0x37, 0, 0, 0, 0, 0, 0, 0};
  CHECK(enc.packed == packed);

  const std::vector<float> dec = decode_fp4_linear(fp4_view("w", ExpertRecipe::nvfp4, 2, 16, enc));
  CHECK(dec[0] == 1.5f);
  CHECK(dec[1] == -0.25f);
  CHECK(dec[3] == 3.0f);
  CHECK(dec[15] == -1.0f);
  CHECK(dec[16] == 0.703125f);    // 6 * 0.1171875
  CHECK(dec[17] == 0.17578125f);  // 1.5 * 0.1171875
  CHECK(dec[18] == 0.0f);
}

TEST_CASE("NVFP4 all-zero block gets code 0x38 (1.0) (§3.8 rule 7)") {
  std::vector<float> w(32, 0.0f);
  w[0] = 1.0f;  // block 0 nonzero, block 1 all zero
  const Fp4Encoded enc = encode_nvfp4(w.data(), 1, 32);
  CHECK(enc.scales[1] == 0x38);
}

TEST_CASE("FP8 block-scaled linear: 200 x 136 with partial edge blocks (§3.4, §3.8 rule 4)") {
  const int64_t rows = 200, cols = 136;
  std::vector<float> w = random_matrix(0x5eed01, rows * cols, 1.0f);
  // Different magnitudes per block, so a wrong block index shows up as a wrong scale.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      w[r * cols + c] *= (r >= 128 ? 1000.0f : 1.0f) * (c >= 128 ? 0.001f : 1.0f);
  const Fp8Encoded enc = encode_fp8_linear(w.data(), rows, cols);
  REQUIRE(enc.scales.size() == 4);  // [ceil(200/128), ceil(136/128)] = [2, 2]
  REQUIRE(enc.codes.size() == static_cast<size_t>(rows * cols));

  // Law of rule 4: 448 2^(k-1) < amax <= 448 2^k per block, amax computed here.
  for (int br = 0; br < 2; ++br)
    for (int bc = 0; bc < 2; ++bc) {
      float amax = 0;
      for (int64_t r = br * 128; r < std::min<int64_t>(rows, br * 128 + 128); ++r)
        for (int64_t c = bc * 128; c < std::min<int64_t>(cols, bc * 128 + 128); ++c)
          amax = std::max(amax, std::fabs(w[r * cols + c]));
      const int k = enc.scales[br * 2 + bc] - 127;
      INFO("block ", br, ", ", bc);
      CHECK(amax <= std::ldexp(448.0, k));
      CHECK(amax > std::ldexp(448.0, k - 1));
    }

  Fp8Linear lin{byte_view("wq.weight", DType::F8_E4M3, {rows, cols}, enc.codes),
                byte_view("wq.scale", DType::F8_E8M0, {2, 2}, enc.scales)};
  const std::vector<float> dec = decode_fp8_linear(lin);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int k = enc.scales[(r / 128) * 2 + c / 128] - 127;
      // e4m3 nearest rounding: half an ulp, 2^-4 relative for normals, 2^-10 2^k absolute below.
      const double bound = std::max(std::fabs(w[r * cols + c]) / 16.0, std::ldexp(1.0, k - 10));
      INFO("element ", r, ", ", c);
      CHECK(std::fabs(dec[r * cols + c] - w[r * cols + c]) <= bound);
      CHECK(fp8_linear_at(lin, r, c) == dec[r * cols + c]);
    }

  // Round trip: re-encoding the decoded matrix reproduces it bit for bit.
  const Fp8Encoded again = encode_fp8_linear(dec.data(), rows, cols);
  Fp8Linear lin2{byte_view("wq.weight", DType::F8_E4M3, {rows, cols}, again.codes),
                 byte_view("wq.scale", DType::F8_E8M0, {2, 2}, again.scales)};
  CHECK(decode_fp8_linear(lin2) == dec);
}

TEST_CASE("FP8 decoder refuses a scale grid of the wrong shape, naming the tensor") {
  std::vector<uint8_t> codes(200 * 136, 0x38), scales(2, 127);
  Fp8Linear lin{byte_view("wq.weight", DType::F8_E4M3, {200, 136}, codes),
                byte_view("wq.scale", DType::F8_E8M0, {2, 1}, scales)};
  CHECK_THROWS_WITH_AS(decode_fp8_linear(lin),
                       "tensor wq.scale: expected F8_E8M0 [2, 2], got F8_E8M0 [2, 1] with 2 bytes",
                       Error);
}

TEST_CASE("FP4 round trips decode(encode(decode(x))) == decode(x), MXFP4 and NVFP4") {
  const int64_t rows = 8, cols = 128;
  std::vector<float> w = random_matrix(0x5eed02, rows * cols, 2.0f);
  for (int64_t i = 0; i < rows * cols; i += 37) w[i] *= 64.0f;  // spread the group scales
  for (ExpertRecipe recipe : {ExpertRecipe::mxfp4, ExpertRecipe::nvfp4}) {
    const auto encode = recipe == ExpertRecipe::mxfp4 ? encode_mxfp4 : encode_nvfp4;
    const Fp4Encoded e1 = encode(w.data(), rows, cols);
    const std::vector<float> d1 = decode_fp4_linear(fp4_view("w", recipe, rows, cols, e1));
    const Fp4Encoded e2 = encode(d1.data(), rows, cols);
    const std::vector<float> d2 = decode_fp4_linear(fp4_view("w", recipe, rows, cols, e2));
    CHECK(d2 == d1);
    // Half the widest E2M1 gap (4 -> 6) is d, and d <= amax / 3 for both rules (rule 6:
    // 2^k < 2 amax / 6; rule 7: v is at most 9/8 of the smallest covering value).
    const int64_t group = recipe == ExpertRecipe::mxfp4 ? 32 : 16;
    for (int64_t i = 0; i < rows * cols; i += group) {
      float amax = 0;
      for (int64_t j = i; j < i + group; ++j) amax = std::max(amax, std::fabs(w[j]));
      for (int64_t j = i; j < i + group; ++j) CHECK(std::fabs(d1[j] - w[j]) <= amax / 3);
    }
  }
}

TEST_CASE("Rule 8: MXFP4 -> NVFP4 recast keeps the nibbles and gives identical f32 values") {
  const int64_t rows = 4, cols = 128;
  std::vector<float> w = random_matrix(0x5eed03, rows * cols, 1.0f);
  // Group g of row r scaled by 2^(g + r - 3): exponents spread over 7 binades.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      w[r * cols + c] *= std::ldexp(1.0f, static_cast<int>(c / 32 + r) - 3);
  const Fp4Encoded mx = encode_mxfp4(w.data(), rows, cols);
  const Fp4Encoded nv = mxfp4_to_nvfp4(mx, rows, cols);
  CHECK(nv.packed == mx.packed);
  CHECK(nv.scales.size() == mx.scales.size() * 2);
  const float s2 = nv.scale_2;
  CHECK((s2 > 0 && (bits_of(s2) & 0x7FFFFFu) == 0));  // a power of two
  const std::vector<float> a = decode_fp4_linear(fp4_view("w", ExpertRecipe::mxfp4, rows, cols, mx));
  const std::vector<float> b = decode_fp4_linear(fp4_view("w", ExpertRecipe::nvfp4, rows, cols, nv));
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(bits_of(a[i]) == bits_of(b[i]));

  // Group exponents 2^-10 .. 2^10 apart cannot share one s2.
  Fp4Encoded wide = mx;
  wide.scales[0] = 100;
  wide.scales[1] = 140;
  CHECK_THROWS_AS(mxfp4_to_nvfp4(wide, rows, cols), Error);
}

TEST_CASE("FP4 encoders refuse a width that is not a multiple of the group") {
  std::vector<float> w(48, 1.0f);
  CHECK_THROWS_AS(encode_mxfp4(w.data(), 1, 48), Error);
  CHECK_NOTHROW(encode_nvfp4(w.data(), 1, 48));
}
