// Bit-exact decoders and deterministic encoders (CHECKPOINT.md §3).
#include "model/codecs.h"

#include <algorithm>
#include <cmath>

#include "base/scalar_formats.h"
#include "base/error.h"
#include "model/synthetic_values.h"

namespace dsv4 {

namespace {

using synth::kFp8Block;
using synth::kMxGroup;
using synth::kNvGroup;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void require_finite(float y, const char* encoder) {
  if (!std::isfinite(y)) throw Error(cat(encoder, ": non-finite input ", y));
}

uint8_t e8m0_code_of_exponent(int k) {
  DSV4_CHECK(k >= -127 && k <= 127, "e8m0 exponent ", k);
  return synth::e8m0_code(k);
}

// Stores the nibble of element (r, c) of a packed [rows, cols / 2] tensor, §3.5 order.
void pack_nibble(std::vector<uint8_t>& packed, int64_t cols, int64_t r, int64_t c, uint8_t nibble) {
  uint8_t& byte = packed[static_cast<size_t>(r * (cols / 2) + c / 2)];
  byte = (c & 1) ? static_cast<uint8_t>((byte & 0x0F) | (nibble << 4))
                 : static_cast<uint8_t>((byte & 0xF0) | nibble);
}

void require_fp4_shape(int64_t rows, int64_t cols, int group, const char* encoder) {
  if (rows < 0 || cols < 0 || cols % group != 0)
    throw Error(cat(encoder, ": shape [", rows, ", ", cols, "] needs cols a multiple of ", group));
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? ", " : "", shape[i]);
  return s + "]";
}

// Views passed to the whole-matrix decoders must match §3.4 / §3.6 / §3.7 exactly.
void require_view(const TensorView& v, DType dtype, std::vector<int64_t> shape) {
  if (v.dtype != dtype || v.shape != shape ||
      v.nbytes != static_cast<size_t>(v.numel()) * dtype_size(dtype)) {
    throw Error(cat("tensor ", v.name, ": expected ", dtype_name(dtype), " ", shape_str(shape),
                    ", got ", dtype_name(v.dtype), " ", shape_str(v.shape), " with ", v.nbytes,
                    " bytes"));
  }
}

}  // namespace

// ---- §3.1 BF16 ----

uint16_t f32_to_bf16(float x) {
  if (std::isnan(x)) throw Error("f32_to_bf16: NaN input (CHECKPOINT.md §3.8 rule 1)");
  return static_cast<uint16_t>(f32_bits(bf16_round(x)) >> 16);
}

float round_to_bf16(float x) { return bf16_round(x); }

// ---- §3.2 E4M3FN ----

uint8_t encode_e4m3(float y) {
  require_finite(y, "encode_e4m3");
  return synth::e4m3_encode(y);
}

// ---- §3.5 E2M1 ----

uint8_t encode_e2m1(float y) {
  require_finite(y, "encode_e2m1");
  return synth::e2m1_encode(y);
}

// ---- §3.4 FP8 block-scaled linear ----

float fp8_linear_at(const Fp8Linear& w, int64_t r, int64_t c) {
  const int64_t scale_cols = ceil_div(w.in(), kFp8Block);
  return e4m3_to_f32(w.weight.data[r * w.in() + c]) *
         e8m0_to_f32(w.scale.data[(r / kFp8Block) * scale_cols + c / kFp8Block]);
}

std::vector<float> decode_fp8_linear(const Fp8Linear& w) {
  if (w.weight.shape.size() != 2)
    throw Error(
        cat("tensor ", w.weight.name, ": FP8 weight must be 2-D, got ", shape_str(w.weight.shape)));
  const int64_t rows = w.out(), cols = w.in();
  require_view(w.weight, DType::F8_E4M3, {rows, cols});
  require_view(w.scale, DType::F8_E8M0, {ceil_div(rows, kFp8Block), ceil_div(cols, kFp8Block)});
  std::vector<float> out(static_cast<size_t>(rows * cols));  // [out, in]
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] = fp8_linear_at(w, r, c);
  return out;
}

// ---- §3.6 MXFP4 / §3.7 NVFP4 ----

float fp4_linear_at(const Fp4Linear& w, int64_t r, int64_t c) {
  const float q = e2m1_to_f32(fp4_nibble(w.weight.data + r * (w.cols / 2), c));
  const int g = w.group();
  const uint8_t s = w.scale.data[r * (w.cols / g) + c / g];
  if (w.recipe == ExpertRecipe::mxfp4) return q * e8m0_to_f32(s);
  const float block_scale = e4m3_to_f32(s) * w.scale_2;  // canonical order, §3.7
  return block_scale * q;
}

std::vector<float> decode_fp4_linear(const Fp4Linear& w) {
  const bool mx = w.recipe == ExpertRecipe::mxfp4;
  if (w.rows < 0 || w.cols < 0 || w.cols % w.group() != 0)
    throw Error(cat("tensor ", w.weight.name, ": logical shape [", w.rows, ", ", w.cols,
                    "] needs cols a multiple of ", w.group()));
  require_view(w.weight, mx ? DType::I8 : DType::U8, {w.rows, w.cols / 2});
  require_view(w.scale, mx ? DType::F8_E8M0 : DType::F8_E4M3, {w.rows, w.cols / w.group()});
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));  // [rows, cols]
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c)
      out[static_cast<size_t>(r * w.cols + c)] = fp4_linear_at(w, r, c);
  return out;
}

// ---- §3.8 encoders ----

Fp8Encoded encode_fp8_linear(const float* w, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0)
    throw Error(cat("encode_fp8_linear: bad shape [", rows, ", ", cols, "]"));
  const int64_t grid_r = ceil_div(rows, kFp8Block), grid_c = ceil_div(cols, kFp8Block);
  Fp8Encoded enc;
  enc.codes.resize(static_cast<size_t>(rows * cols));       // [rows, cols]
  enc.scales.resize(static_cast<size_t>(grid_r * grid_c));  // [ceil(rows/128), ceil(cols/128)]
  for (int64_t br = 0; br < grid_r; ++br) {
    for (int64_t bc = 0; bc < grid_c; ++bc) {
      const int64_t r0 = br * kFp8Block, r1 = std::min(rows, r0 + kFp8Block);
      const int64_t c0 = bc * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          require_finite(w[r * cols + c], "encode_fp8_linear");
          amax = std::max(amax, std::fabs(w[r * cols + c]));
        }
      const int k = synth::fp8_block_exponent(amax);  // rule 4
      enc.scales[static_cast<size_t>(br * grid_c + bc)] = e8m0_code_of_exponent(k);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          enc.codes[static_cast<size_t>(r * cols + c)] = synth::fp8_code(w[r * cols + c], k);
    }
  }
  return enc;
}

Fp4Encoded encode_mxfp4(const float* w, int64_t rows, int64_t cols) {
  require_fp4_shape(rows, cols, kMxGroup, "encode_mxfp4");
  const int64_t groups = cols / kMxGroup;
  Fp4Encoded enc;
  enc.packed.assign(static_cast<size_t>(rows * cols / 2), 0);  // [rows, cols/2]
  enc.scales.resize(static_cast<size_t>(rows * groups));       // [rows, cols/32]
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = w + r * cols + g * kMxGroup;
      float amax = 0.0f;
      for (int i = 0; i < kMxGroup; ++i) {
        require_finite(x[i], "encode_mxfp4");
        amax = std::max(amax, std::fabs(x[i]));
      }
      const int k = synth::mxfp4_group_exponent(amax);  // rule 6
      enc.scales[static_cast<size_t>(r * groups + g)] = e8m0_code_of_exponent(k);
      for (int i = 0; i < kMxGroup; ++i)
        pack_nibble(enc.packed, cols, r, g * kMxGroup + i, synth::mxfp4_nibble(x[i], k));
    }
  }
  return enc;
}

Fp4Encoded encode_nvfp4(const float* w, int64_t rows, int64_t cols) {
  require_fp4_shape(rows, cols, kNvGroup, "encode_nvfp4");
  float tensor_amax = 0.0f;
  for (int64_t i = 0; i < rows * cols; ++i) {
    require_finite(w[i], "encode_nvfp4");
    tensor_amax = std::max(tensor_amax, std::fabs(w[i]));
  }
  const double s2 = synth::nvfp4_scale_2(tensor_amax);  // rule 7
  const int64_t groups = cols / kNvGroup;
  Fp4Encoded enc;
  enc.scale_2 = static_cast<float>(s2);
  enc.packed.assign(static_cast<size_t>(rows * cols / 2), 0);  // [rows, cols/2]
  enc.scales.resize(static_cast<size_t>(rows * groups));       // [rows, cols/16]
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = w + r * cols + g * kNvGroup;
      float amax = 0.0f;
      for (int i = 0; i < kNvGroup; ++i) amax = std::max(amax, std::fabs(x[i]));
      const uint8_t code = synth::nvfp4_block_code(amax, s2);
      enc.scales[static_cast<size_t>(r * groups + g)] = code;
      for (int i = 0; i < kNvGroup; ++i)
        pack_nibble(enc.packed, cols, r, g * kNvGroup + i, synth::nvfp4_nibble(x[i], code, s2));
    }
  }
  return enc;
}

Fp4Encoded mxfp4_to_nvfp4(const Fp4Encoded& mx, int64_t rows, int64_t cols) {
  require_fp4_shape(rows, cols, kMxGroup, "mxfp4_to_nvfp4");
  if (mx.packed.size() != static_cast<size_t>(rows * cols / 2) ||
      mx.scales.size() != static_cast<size_t>(rows * (cols / kMxGroup)))
    throw Error(cat("mxfp4_to_nvfp4: buffers do not match shape [", rows, ", ", cols, "]"));
  // Rule 8: one s2 = 2^m with every group's 2^(k_g - m) inside e4m3's power-of-two
  // range [2^-9, 2^8]; m is the smallest such value (largest block codes).
  int k_min = 127, k_max = -127;
  for (uint8_t s : mx.scales) {
    if (s == 0xFF) throw Error("mxfp4_to_nvfp4: E8M0 scale 0xFF (NaN)");
    k_min = std::min(k_min, s - 127);
    k_max = std::max(k_max, s - 127);
  }
  const int m = mx.scales.empty() ? 0 : std::max(k_max - 8, -126);
  if (!mx.scales.empty() && k_min - m < -9)
    throw Error(cat("mxfp4_to_nvfp4: group exponents span [", k_min, ", ", k_max,
                    "], wider than e4m3's power-of-two range"));
  Fp4Encoded nv;
  nv.packed = mx.packed;  // nibbles unchanged
  nv.scale_2 = std::ldexp(1.0f, m);
  nv.scales.reserve(mx.scales.size() * 2);  // [rows, cols/16]
  for (uint8_t s : mx.scales) {
    const uint8_t code = encode_e4m3(std::ldexp(1.0f, s - 127 - m));  // exact power of two
    nv.scales.push_back(code);  // both 16-groups of the 32-group
    nv.scales.push_back(code);
  }
  return nv;
}

}  // namespace dsv4
