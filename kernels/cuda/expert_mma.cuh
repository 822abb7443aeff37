// The routed experts' tensor-core pieces shared by the decode MoE (moe.cu) and the prefill
// MoE (moe_prefill.cu), MODEL.md §4.23-§4.24: the FP4 weight run as exact bf16 mma
// A fragments, the activation as exact bf16 planes (mma_bf16.cuh: the planes and the mma), and the host launchers of
// the small kernels both paths run (defined in moe.cu). Both expert kernels feed the same
// products to every output column in the same K order (docs/numerics.md "MoE experts"),
// so a prefill row equals the decode row bit for bit.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/mma_bf16.cuh"
#include "kernels/ops.h"

namespace dsv4::cuda {

constexpr int kMmaRows = 16;    // weight rows of one mma: its m16
constexpr int kMmaCols = 8;     // slots of one mma: its n8
constexpr int kKChunk = 128;    // K per lane group and chunk: 4 lanes x one 32-element run
constexpr int kKWarps = 8;      // the K split: chunk c belongs to partial c % 8 (the decode warps)

// ---- e2m1 -> bf16 (CHECKPOINT.md §3.5) and the mma ----

// Low / high bytes of bf16(|e2m1|) for magnitude codes 0-3 and 4-7 (0, .5, 1, 1.5 | 2, 3,
// 4, 6 = 0x0000 0x3F00 0x3F80 0x3FC0 | 0x4000 0x4040 0x4080 0x40C0), as prmt tables.
constexpr uint32_t kLo03 = 0xC0800000u, kLo47 = 0xC0804000u;
constexpr uint32_t kHi03 = 0x3F3F3F00u, kHi47 = 0x40404040u;
constexpr uint32_t kSigns = 0x80008000u;

// The 8 e2m1 codes of `w` (nibble i = element i) as exact bf16x2 pairs, low half first:
// r[j] = {n_j, n_(j+4)}. Pairing j with j + 4 puts both sign bits 4j + 3 and 4j + 19 one
// shift away from bits 15 and 31. Two byte lookups per 4 codes (magnitudes; the selector's
// bit 3 is cleared first), one interleave per pair: ~2.3 instructions per code.
__device__ inline void e2m1x8_to_bf16x2(uint32_t w, uint32_t (&r)[4]) {
  const uint32_t mag = w & 0x77777777u;
  const uint32_t sel_a = __byte_perm(mag, 0, 0x0020);  // nibbles n0 n1 n4 n5
  const uint32_t sel_b = __byte_perm(mag, 0, 0x0031);  // nibbles n2 n3 n6 n7
  const uint32_t lo_a = __byte_perm(kLo03, kLo47, sel_a), hi_a = __byte_perm(kHi03, kHi47, sel_a);
  const uint32_t lo_b = __byte_perm(kLo03, kLo47, sel_b), hi_b = __byte_perm(kHi03, kHi47, sel_b);
  r[0] = __byte_perm(lo_a, hi_a, 0x6240) | ((w << 12) & kSigns);
  r[1] = __byte_perm(lo_a, hi_a, 0x7351) | ((w << 8) & kSigns);
  r[2] = __byte_perm(lo_b, hi_b, 0x6240) | ((w << 4) & kSigns);
  r[3] = __byte_perm(lo_b, hi_b, 0x7351) | (w & kSigns);
}

// The same pairs as e2m1x8_to_bf16x2, bit for bit, with the magnitudes placed instead of
// looked up: the bf16 whose bits are s 0 e1 e0 m 000000 (exponent field e, top mantissa
// bit m) is the e2m1 value times 2^-126 exactly (e >= 1: 2^(e-127) (1 + m/2); e = 0: the
// subnormal m 2^-127), so one exact bf16x2 multiply by 2^126 gives bf16(e2m1) with its
// sign (-0 for code 8). Pair j's two nibbles move by the same shift (6 - 4j for the
// magnitude, 12 - 4j for the sign): ~1.9 integer instructions per code instead of ~2.3,
// and one more multiply per pair, which runs on the FMA pipe. Needs bf16 multiplies that
// keep subnormal inputs (PTX ISA mul.bf16x2: no flush to zero).
__device__ inline void e2m1x8_to_bf16x2_placed(uint32_t w, uint32_t (&r)[4]) {
  const __nv_bfloat162 two_126 = bf16x2_of(0x7E807E80u);  // 2^126: exponent field 253
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t mag = (j < 2 ? w << (6 - 4 * j) : w >> (4 * j - 6)) & 0x01C001C0u;
    const uint32_t sign = (w << (12 - 4 * j)) & kSigns;
    r[j] = bf16x2_bits(__hmul2(bf16x2_of(mag | sign), two_126));
  }
}

// The block scales of a run's two 16-element halves as bf16x2 pairs {s, s}: e8m0 (MXFP4,
// §3.6, one group: both halves the same) or e4m3 (NVFP4, §3.7, by the hardware e4m3x2 ->
// f16x2 conversion; weight_scale_2 is applied to the sum). Exact: a power of two, or 4
// significant bits, both within bf16; so is its product with an e2m1 value (<= 6 bits),
// which is the CPU reference's dequantized weight wherever that is a normal f32.
__device__ inline void scale_pairs(const Fp4W& w, const uint8_t (&code)[2], __nv_bfloat162 (&s)[2]) {
  if (w.nv) {
    const auto codes = static_cast<__nv_fp8x2_storage_t>(code[0] | (code[1] << 8));
    const float2 v = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3)));
    s[0] = __float2bfloat162_rn(v.x);
    s[1] = __float2bfloat162_rn(v.y);
  } else {
    s[0] = s[1] = __float2bfloat162_rn(e8m0_to_f32(code[0]));
  }
}

// The 32-element run of row r at k0 (k0 % 32 == 0): its packed words and the scale codes
// of its two 16-halves (the same code twice when one group covers it). gs: log2 of the
// scale group, 16 (NVFP4) or 32 (MXFP4).
__device__ inline void load_run(const Fp4W& w, int gs, int64_t r, int64_t k0, uint32_t (&raw)[4],
                                uint8_t (&sc)[2]) {
  w.words(r, k0, raw);
  const uint8_t* sp = w.scales + (r * w.cols >> gs);
  sc[0] = __ldg(sp + (k0 >> gs));
  sc[1] = __ldg(sp + ((k0 + 16) >> gs));
}

// The A fragments of word q of a lane's runs (w_g: row g, w_g8: row g + 8, with their
// half scales s_g / s_g8 of that word) for the two k16 steps of the word: the mma's k-slots
// {2t, 2t+1, 2t+8, 2t+9} of step st hold the run's elements 8q + {2st, 2st+4, 2st+1,
// 2st+5} (any bijection of k inside a step is a valid order of the sum); the activation
// planes pair the same elements (bf16x2_planes on {x[8q + w], x[8q + w + 4]}, word w of
// step w / 2, register w % 2). kPlaced: the codes by e2m1x8_to_bf16x2_placed (same bits).
template <bool kPlaced = false>
__device__ inline void a_fragments(uint32_t w_g, uint32_t w_g8, __nv_bfloat162 s_g, __nv_bfloat162 s_g8,
                                   uint32_t (&frag)[2][4]) {
  uint32_t r[2][4];
  if constexpr (kPlaced) {
    e2m1x8_to_bf16x2_placed(w_g, r[0]);
    e2m1x8_to_bf16x2_placed(w_g8, r[1]);
  } else {
    e2m1x8_to_bf16x2(w_g, r[0]);
    e2m1x8_to_bf16x2(w_g8, r[1]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    r[0][i] = bf16x2_bits(__hmul2(bf16x2_of(r[0][i]), s_g));
    r[1][i] = bf16x2_bits(__hmul2(bf16x2_of(r[1][i]), s_g8));
  }
#pragma unroll
  for (int st = 0; st < 2; ++st) {
    frag[st][0] = r[0][2 * st];
    frag[st][1] = r[1][2 * st];
    frag[st][2] = r[0][2 * st + 1];
    frag[st][3] = r[1][2 * st + 1];
  }
}

// NW = 2: w1, w3 of the expert (up, out h); NW = 1: w2 (down). Expert: ExpertW (Fp4W
// projections) or the fragment layout's ExpertFrag (Fp4Frag, expert_fp4.cuh).
template <int NW, class Expert, class Projection>
__device__ inline void projections(const Expert& e, Projection (&w)[NW]) {
  if constexpr (NW == 2) {
    w[0] = e.w1;
    w[1] = e.w3;
  } else {
    w[0] = e.w2;
  }
}

// ---- launchers shared by moe.cu and moe_prefill.cu (defined in moe.cu) ----

struct HcPost;  // hc_post.cuh

// The shared expert's h [rows, inter] = swiglu(g, u) with weight 1 (§4.24).
void shared_swiglu(const float* g, const float* u, int64_t rows, int inter, float limit, float* h,
                   cudaStream_t stream);
// out[t, :] = (sum over row t's slots in ascending expert id of y[slot, :], from 0) + sh[t, :]
// (§4.23 step 6); a slot whose id is outside [0, n_experts) adds NaN. post: hc_post of out
// in the same launch (hc_post.cuh; Ops::moe_hc_post).
void combine_experts(const float* y, const float* sh, const int32_t* sel, int64_t rows, int k, int hidden,
                     int n_experts, float* out, cudaStream_t stream, const HcPost* post = nullptr);
// The checks every MoE call makes (the layer named): k in [1, 16], expert widths whole
// K chunks (kKChunk; §4.9 blocks), and the bf16 arm's NVFP4 weight_scale_2 a power of two (C4).
void check_experts(const BlockWeights& b, int k, int hidden, const Numerics& num);

}  // namespace dsv4::cuda
