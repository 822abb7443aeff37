// Bit-exact decoders and deterministic encoders of CHECKPOINT.md §3.
#pragma once
#include <cstdint>
#include <vector>

#include "base/scalar_formats.h"
#include "model/tensor_view.h"

namespace dsv4 {

// Decoders of one scalar (bf16_to_f32, e4m3_to_f32 with 0x7F / 0xFF NaN, e8m0_to_f32 with
// 0 -> 2^-127 exactly (C6) and 0xFF NaN, e2m1_to_f32 with 0x8 -> -0.0 (C5), fp4_nibble):
// base/scalar_formats.h, shared with the CUDA kernels.

// §3.1
uint16_t f32_to_bf16(float x);  // RNE (§3.8 rule 1); throws Error on NaN
float round_to_bf16(float x);   // bf16_to_f32(RNE(x)), NaN passes through (kernels)

// §3.8 rule 2: writer encoder (clamps to 448, never emits -0).
uint8_t encode_e4m3(float y);

// §3.8 rule 5 writer encoder (ties to even, saturate at 6, never emits 0x8).
uint8_t encode_e2m1(float y);

// §3.4: one element / a whole dequantized FP8 block-scaled matrix [out, in].
float fp8_linear_at(const Fp8Linear& w, int64_t r, int64_t c);
std::vector<float> decode_fp8_linear(const Fp8Linear& w);
// §3.6 / §3.7: one element / a whole dequantized FP4 projection [rows, cols].
float fp4_linear_at(const Fp4Linear& w, int64_t r, int64_t c);
std::vector<float> decode_fp4_linear(const Fp4Linear& w);

// §3.8 encoders (f32 master, row-major [rows, cols]).
struct Fp8Encoded { std::vector<uint8_t> codes, scales; };            // scales [ceil/128]^2
Fp8Encoded encode_fp8_linear(const float* w, int64_t rows, int64_t cols);   // rule 4
struct Fp4Encoded { std::vector<uint8_t> packed, scales; float scale_2 = 1.0f; };
Fp4Encoded encode_mxfp4(const float* w, int64_t rows, int64_t cols);        // rule 6
Fp4Encoded encode_nvfp4(const float* w, int64_t rows, int64_t cols);        // rule 7
// Rule 8: lossless MXFP4 -> NVFP4 recast (nibbles unchanged).
Fp4Encoded mxfp4_to_nvfp4(const Fp4Encoded& mx, int64_t rows, int64_t cols);

}  // namespace dsv4
