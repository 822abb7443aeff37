// Host generator of synthetic tensors (CHECKPOINT.md §3.8), unit by unit: an island
// element, a 128x128 FP8 block, a 32- or 16-element FP4 group, a tid2eid row. The
// rules themselves are model/synthetic_values.h, shared with the CUDA generator.
#include "model/synthetic_host.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/error.h"
#include "model/synthetic_values.h"

namespace dsv4 {

namespace {

using namespace synth;

void island(const SynthTensor& t, uint8_t* out) {
  const int64_t n = t.rows * t.cols;
  for (int64_t i = 0; i < n; ++i) {
    const float v = master_at(t.state, static_cast<uint64_t>(i), t.lo, t.hi);
    if (t.dtype == DType::F32) {
      std::memcpy(out + 4 * i, &v, 4);
    } else {
      const uint16_t b = static_cast<uint16_t>(f32_bits(bf16_round(v)) >> 16);
      std::memcpy(out + 2 * i, &b, 2);
    }
  }
}

float master(const SynthTensor& t, int64_t r, int64_t c) {
  return master_at(t.state, static_cast<uint64_t>(r * t.cols + c), t.lo, t.hi);
}

// Rule 4: codes [rows, cols] and/or E8M0 scales [ceil(rows/128), ceil(cols/128)].
void fp8(const SynthTensor& t, uint8_t* codes, uint8_t* scales) {
  const int64_t grid_c = (t.cols + kFp8Block - 1) / kFp8Block;
  for (int64_t r0 = 0; r0 < t.rows; r0 += kFp8Block)
    for (int64_t c0 = 0; c0 < t.cols; c0 += kFp8Block) {
      const int64_t r1 = std::min(t.rows, r0 + kFp8Block), c1 = std::min(t.cols, c0 + kFp8Block);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(master(t, r, c)));
      const int k = fp8_block_exponent(amax);
      if (scales) scales[(r0 / kFp8Block) * grid_c + c0 / kFp8Block] = e8m0_code(k);
      if (codes)
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) codes[r * t.cols + c] = fp8_code(master(t, r, c), k);
    }
}

void put_nibble(uint8_t* packed, int64_t cols, int64_t r, int64_t c, uint8_t nibble) {
  uint8_t& b = packed[r * (cols / 2) + c / 2];
  b = (c & 1) ? static_cast<uint8_t>((b & 0x0F) | (nibble << 4)) : static_cast<uint8_t>((b & 0xF0) | nibble);
}

// Rule 6: packed [rows, cols/2] and/or E8M0 scales [rows, cols/32].
void mxfp4(const SynthTensor& t, uint8_t* packed, uint8_t* scales) {
  const int64_t groups = t.cols / kMxGroup;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      float x[kMxGroup], amax = 0.0f;
      for (int i = 0; i < kMxGroup; ++i) amax = std::max(amax, std::fabs(x[i] = master(t, r, g * kMxGroup + i)));
      const int k = mxfp4_group_exponent(amax);
      if (scales) scales[r * groups + g] = e8m0_code(k);
      if (packed)
        for (int i = 0; i < kMxGroup; ++i) put_nibble(packed, t.cols, r, g * kMxGroup + i, mxfp4_nibble(x[i], k));
    }
}

float tensor_amax(const SynthTensor& t) {
  float amax = 0.0f;
  for (int64_t i = 0; i < t.rows * t.cols; ++i)
    amax = std::max(amax, std::fabs(master_at(t.state, static_cast<uint64_t>(i), t.lo, t.hi)));
  return amax;
}

// Rule 7: packed [rows, cols/2] and/or E4M3 block scales [rows, cols/16].
void nvfp4(const SynthTensor& t, uint8_t* packed, uint8_t* scales) {
  const double s2 = nvfp4_scale_2(tensor_amax(t));
  const int64_t groups = t.cols / kNvGroup;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      float x[kNvGroup], amax = 0.0f;
      for (int i = 0; i < kNvGroup; ++i) amax = std::max(amax, std::fabs(x[i] = master(t, r, g * kNvGroup + i)));
      const uint8_t code = nvfp4_block_code(amax, s2);
      if (scales) scales[r * groups + g] = code;
      if (packed)
        for (int i = 0; i < kNvGroup; ++i) put_nibble(packed, t.cols, r, g * kNvGroup + i, nvfp4_nibble(x[i], code, s2));
    }
}

// Row v's draws start at v * (E - 1): every row consumes E - 1 of the tensor's stream.
void tid2eid(const SynthTensor& t, uint8_t* out) {
  const int64_t V = t.shape.at(0), K = t.shape.at(1), E = t.experts;
  std::vector<int64_t> perm(static_cast<size_t>(E));
  for (int64_t v = 0; v < V; ++v) {
    std::iota(perm.begin(), perm.end(), int64_t{0});
    uint64_t draw = static_cast<uint64_t>(v * (E - 1));
    for (int64_t i = E - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(unit_at(t.state, draw++) * static_cast<double>(i + 1));
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
    }
    std::memcpy(out + v * K * 8, perm.data(), static_cast<size_t>(K) * 8);
  }
}

}  // namespace

void synth_generate_host(const SynthTensor& t, uint8_t* out) {
  switch (t.kind) {
    case SynthKind::island: island(t, out); break;
    case SynthKind::fp8_codes: fp8(t, out, nullptr); break;
    case SynthKind::fp8_scales: fp8(t, nullptr, out); break;
    case SynthKind::mx_packed:
      std::memset(out, 0, t.bytes());
      mxfp4(t, out, nullptr);
      break;
    case SynthKind::mx_scales: mxfp4(t, nullptr, out); break;
    case SynthKind::nv_packed:
      std::memset(out, 0, t.bytes());
      nvfp4(t, out, nullptr);
      break;
    case SynthKind::nv_scales: nvfp4(t, nullptr, out); break;
    case SynthKind::nv_scale_2: {
      const float s2 = static_cast<float>(nvfp4_scale_2(tensor_amax(t)));
      std::memcpy(out, &s2, 4);
      break;
    }
    case SynthKind::one: {
      const float one = 1.0f;
      std::memcpy(out, &one, 4);
      break;
    }
    case SynthKind::tid2eid: tid2eid(t, out); break;
  }
}

}  // namespace dsv4
