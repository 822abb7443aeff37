// The fragment-layout FP4 expert path of the MoE (MODEL.md §4.23, native arm: e4m3
// activations; CHECKPOINT.md §3.5-§3.7): the engine's native arm, CudaOps::moe (decode and
// verify: moe.cu routed_fragment, on the table CudaOps::expert_table relays in place at
// its first build) and, through the prefill kernel on the same layout (expert_fp4_gemm.cuh,
// whose outputs equal this kernel's bit for bit), CudaOps::moe_gemm; the bf16 arm keeps
// the shipped kernels (moe.cu expert_mma_kernel, expert_gemm.cuh) on the checkpoint
// layout. The dev benches time both on relaid copies (FragExperts): bench/dev/
// moe_variants.cu (arms "fp4 R*") and moe_prefill_variants.cu (the "fp4" lines).
//
// Each projection W [M, K] is re-laid out once, on the device, into the order of the
// mma.m16n8k16 A fragments (relayout_fp4, same byte size), so one 16-byte load of a lane
// is that lane's A registers for 4 k16 steps of 16 rows, and its block scales sit beside
// them grouped per 16 rows and 128-element K chunk (one 16- or 8-byte load a lane a chunk).
// The e2m1 codes become exact fp16 by placing their bits (e2m1x8_frag_to_f16x2, 13
// integer instructions per 8 codes, no multiply); the mma is f16 x f16 -> f32 with the
// activation's e4m3 values (exact in fp16) as B, and the §4.9 activation block scale (a
// power of two) and the MXFP4 block scale (a power of two) are applied in f32 after the
// mma; the NVFP4 block scale (e4m3) multiplies the fp16 A values exactly (see
// nvfp4_scaled). Every product is the CPU reference's exact product: only the f32 order of
// the sum differs (docs/numerics.md "MoE experts").
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/cuda/moe_experts.cuh"

namespace dsv4::cuda {

// ---- the fragment layout ----
//
// Codes: unit (b, u) = rows 16b .. 16b + 15, K 64u .. 64u + 63, 512 bytes at byte
// 512 (b K/64 + u); lane L = 4g + t holds bytes 16L .. 16L + 15: word q is k16 step q of
// the unit, whose 32 bits are the lane's A registers a_j (PTX ISA m16n8k16 .f16 A layout):
// a_0 row g, k-slots {2t, 2t+1}; a_1 row g + 8, {2t, 2t+1}; a_2 row g, {2t+8, 2t+9};
// a_3 row g + 8, {2t+8, 2t+9}; k-slot s of step q is k = 64u + 16q + s. Register j's even
// slot code n (its low fp16 half) is stored as its magnitude n & 7 at 3 bits and its sign
// n >> 3 at one bit of the half word, its odd slot code (high half) 16 bits higher, at the
// places of the word's FragCodes (kMagAt, kSignAt; e2m1x8_frag_to_f16x2 decodes them).
// Scales, per (m-block b, 128-chunk c = K 128c ..), lane group g (rows g, g + 8):
// NVFP4: 16 bytes at 16 ((b K/128 + c) 8 + g): byte 2s + h = e4m3 code of row 16b + g + 8h,
// group 8c + s (s = 4u + q: the chunk's k16 step); MXFP4: 8 bytes at 8 ((b K/128 + c) 8 +
// g): byte 2r + h = the e8m0 code of row 16b + g + 8h, group 4c + r, plus 14 (the fp16
// placement's 2^-14 undone in the f32 scale: mxfp4_scale). Same byte counts as the
// checkpoint's tensors.
// Where a word holds its codes (the relayout writes them, e2m1x8_frag_to_f16x2 reads them;
// the decoded registers are the same either way). staggered: each half word is [mag a_3 |
// mag a_2 | mag a_1 | mag a_0 | signs a_0..a_3] from bit 0, register j = (w << 3j) & mags |
// (w << (3 - j)) & signs: 5 shifts, 8 lop3 a word. paired: [mag a_0 | mag a_1 | mag a_2 |
// mag a_3 | sign a_2 | sign a_0 | sign a_1 | sign a_3], so a_2 and a_3 take their
// magnitude and sign from one shifted word (one lop3 each): 5 shifts, 6 lop3 a word (the
// fewest over all placements of 3 + 1 bits a register, counting a lop3 a mask and a shift
// an amount).
enum class FragCodes { staggered = 0, paired = 1 };
__host__ __device__ constexpr int kMagAt(FragCodes c, int j) { return c == FragCodes::paired ? 3 * j : 9 - 3 * j; }
__host__ __device__ constexpr int kSignAt(FragCodes c, int j) {
  return c == FragCodes::paired ? (j == 0 ? 13 : j == 1 ? 14 : j == 2 ? 12 : 15) : 12 + j;
}

// The decode kernel's compile-time variants (dsv4-dev-moe "fp4 v<N> R<ring>"): the same
// copies, products and K order, so every variant equals v0 bit for bit.
// v0 lookup: each warp finds an item's tile, expert and projections by three dependent
//    global loads (slots, sel, the expert table) when its copies enter the item and again
//    when its mma reach it (for the epilogue): ~6 L2 round trips an item a warp.
// v1 table: the block looks up all its items once, each thread one, into a shared table
//    (kFragTableItems rows: slots, code and scale bases, weight_scale_2) before the ring
//    starts; items then cost shared loads. A call whose blocks could hold more items than
//    the table runs v0's walk (launch_expert_fp4 decides from tiles_max).
// v2 paired: v1 on weights relaid with FragCodes::paired (2 of 13 integer instructions a
//    word fewer: 32 of ~445 a warp's chunk step).
enum class FragVariant { lookup = 0, table = 1, paired = 2 };
constexpr int kFragTableItems = 28;  // 9 rows of 6 experts fit (<= 27 items a block at 264 blocks)
// The layout a variant's weights are relaid in.
constexpr FragCodes codes_of(FragVariant v) { return v == FragVariant::paired ? FragCodes::paired : FragCodes::staggered; }
// The engine's variant (CudaOps::moe, launch_expert_fp4's default) and so the layout
// relay_experts writes and the prefill kernel reads (frag_step_pair's default).
constexpr FragVariant kFragVariant = FragVariant::paired;
constexpr FragCodes kFragCodes = codes_of(kFragVariant);

struct Fp4Frag {
  const uint4* codes = nullptr;     // [M/16][K/64][32 lanes] 16 bytes
  const uint8_t* scales = nullptr;  // as above
  float scale_2 = 1.0f;             // §3.7 weight_scale_2 (1 for MXFP4), applied to the sum
  bool nv = false;
};
struct ExpertFrag {
  Fp4Frag w1, w3, w2;
};

constexpr int kFragUnitK = 64;   // K of one unit: 4 k16 steps
constexpr int kMxScaleBias = 14;  // added to each MXFP4 code by the relayout
// The largest e8m0 code the relayout takes: code + 14 must stay a finite f32 exponent.
constexpr int kMxMaxCode = 254 - kMxScaleBias;

// The relayout of one projection (its packed bytes and scales at src, rows x src.cols) into
// codes / scales (device buffers of the same sizes, not src's). rows % 16 == 0, cols % 128
// == 0 (check_experts); an MXFP4 scale code above kMxMaxCode must have been refused before
// (relay_experts).
void relayout_fp4(const Fp4W& src, int64_t rows, uint8_t* codes, uint8_t* scales, cudaStream_t stream,
                  FragCodes layout = kFragCodes);

// Where relay_experts writes the fragment layout: over the checkpoint-layout bytes
// themselves (the engine: Flash cannot hold its ~140 GB of experts twice; the bytes are
// then read by the fragment kernel alone, docs/fp4-fragment-kernel.md "Adoption"), or into
// new device buffers (the dev bench, which runs the shipped kernel on the checkpoint
// layout beside it).
enum class FragPlace { in_place, copies };

// The fragment-layout projections of one layer's experts, as the host copy of its table:
// experts are the checkpoint-layout projections (device pointers), w1 / w3 [inter, hidden],
// w2 [hidden, inter]. Each distinct projection is relaid once: `relaid` maps the packed
// bytes of every projection relaid so far (across the layers of a caller whose experts
// share bytes) to its fragment view and is extended; the others are taken from it as they
// are. Refuses widths that are not whole 16 x 128 tiles and an MXFP4 scale code above
// kMxMaxCode (naming `owner` and the expert) before any byte is written. in_place: one
// scratch of the largest projection, each projection relaid into it and copied back;
// copies: the new buffers are appended to `owned` (the caller frees them). Stream-ordered
// launches, one host synchronization (the scale check) per call.
std::vector<ExpertFrag> relay_experts(const std::vector<ExpertW>& experts, int64_t hidden, int64_t inter,
                                      FragPlace place, const std::string& owner,
                                      std::map<const uint8_t*, Fp4Frag>& relaid, std::vector<void*>& owned,
                                      cudaStream_t stream, FragCodes layout = kFragCodes);

// The relaid copies of one layer's experts and their device table (relay_experts, copies,
// in `layout`): the dev bench's load-time step.
class FragExperts {
 public:
  FragExperts(const std::vector<ExpertW>& experts, int64_t hidden, int64_t inter, cudaStream_t stream,
              FragCodes layout = kFragCodes);
  ~FragExperts();
  FragExperts(const FragExperts&) = delete;
  FragExperts& operator=(const FragExperts&) = delete;
  const ExpertFrag* table() const { return table_; }

 private:
  std::vector<void*> owned_;
  ExpertFrag* table_ = nullptr;
};

// The K split of an output's sum (docs/numerics.md "MoE experts"): partial w of kKWarps
// sums the 128-chunks [partial_chunks(w), partial_chunks(w + 1)) of K's n, ascending (the
// decode kernel's warp w; empty when n < 8), and the partials are added in order.
__host__ __device__ constexpr int partial_chunks(int w, int n) { return w * n / kKWarps; }

// ---- the decode of one word and the mma ----

// The 8 codes of word w (fragment layout C) as the f16x2 registers a_0 .. a_3: the fp16
// with sign s at bit 15, e1 e0 at bits 11-10 and m at bit 9 is the e2m1 value times 2^-14
// exactly (e >= 1: 2^(e-15) (1 + m/2) = 2^-14 2^(e-1) (1 + m/2); e = 0: the subnormal m/2
// 2^-14), -0 for code 8. Register j is (w << (9 - kMagAt)) & mags | (w << (15 - kSignAt))
// & signs. staggered: five shifts (3 shared by a_0's sign and a_1's magnitude), two lop3
// a register, 13 integer instructions for 8 codes; paired: five shifts, 6 lop3, 11.
template <FragCodes C = kFragCodes>
__device__ inline void e2m1x8_frag_to_f16x2(uint32_t w, uint32_t (&r)[4]) {
  constexpr uint32_t kMag = 0x0E000E00u, kSign = 0x80008000u;
  if constexpr (C == FragCodes::paired) {
    r[0] = ((w << 9) & kMag) | ((w << 2) & kSign);
    r[1] = ((w << 6) & kMag) | ((w << 1) & kSign);
    r[2] = (w << 3) & (kMag | kSign);
    r[3] = w & (kMag | kSign);
  } else {
    const uint32_t w3 = w << 3;
    r[0] = (w & kMag) | (w3 & kSign);
    r[1] = (w3 & kMag) | ((w << 2) & kSign);
    r[2] = ((w << 6) & kMag) | ((w << 1) & kSign);
    r[3] = ((w << 9) & kMag) | (w & kSign);
  }
}

__device__ inline uint32_t h2_bits(__half2 v) { return *reinterpret_cast<const uint32_t*>(&v); }
__device__ inline __half2 h2_of(uint32_t v) { return *reinterpret_cast<const __half2*>(&v); }

// a_j times the NVFP4 block scales of rows g (a_0, a_2) and g + 8 (a_1, a_3), the codes'
// pair `codes` (low byte row g): e2m1 x e4m3 x 2^-14 is a multiple of 2^-24 (e2m1 of 2^-1,
// e4m3 of 2^-9) below 6 x 448 x 2^-14 with <= 6 significant bits, so the fp16 product is
// exact (fp16 keeps subnormals).
__device__ inline void nvfp4_scaled(uint16_t codes, uint32_t (&r)[4]) {
  const __half2 s = __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes), __NV_E4M3));
  const __half2 sg = __low2half2(s), sg8 = __high2half2(s);
  r[0] = h2_bits(__hmul2(h2_of(r[0]), sg));
  r[1] = h2_bits(__hmul2(h2_of(r[1]), sg8));
  r[2] = h2_bits(__hmul2(h2_of(r[2]), sg));
  r[3] = h2_bits(__hmul2(h2_of(r[3]), sg8));
}

// The f32 value 2^(c - 127) 2^14 of the relaid MXFP4 code c + 14 at bits p .. p + 7 of word w.
template <int P>
__device__ inline float mxfp4_scale(uint32_t w) {
  const uint32_t at23 = P <= 23 ? w << (23 - P) : w >> (P - 23);
  return __uint_as_float(at23 & 0x7F800000u);
}

// d (+)= A B for one m16n8k16 step, f16 inputs, f32 accumulate (PTX ISA "mma.m16n8k16";
// fragments as mma_m16n8k16_bf16). kZero: D = A B (C = 0).
template <bool kZero = false>
__device__ inline void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kZero) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// ---- one 128-chunk of a lane (the decode and the prefill kernel) ----

// Lane (g, t)'s A registers of steps 4u + 2p and 4u + 2p + 1 of a chunk from its code unit
// u (`unit`, words 2p and 2p + 1), NVFP4 times their block scales (sc: the lane group's 16
// bytes of the chunk), and MXFP4's scales of the pair's 32-group 2u + p (sc: its 8 bytes),
// rows g (sg) and g + 8 (sg8); unit in layout C.
struct FragPair {
  uint32_t a[2][4];
  float sg = 1.0f, sg8 = 1.0f;
};
template <bool NV, class Scales, FragCodes C = kFragCodes>
__device__ inline FragPair frag_step_pair(const uint4& unit, const Scales& sc, int u, int p) {
  FragPair f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int q = 2 * p + h, st = 4 * u + q;
    e2m1x8_frag_to_f16x2<C>(q == 0 ? unit.x : q == 1 ? unit.y : q == 2 ? unit.z : unit.w, f.a[h]);
    if constexpr (NV) {
      const uint32_t pair = st < 4 ? (st < 2 ? sc.x : sc.y) : (st < 6 ? sc.z : sc.w);
      nvfp4_scaled(static_cast<uint16_t>(pair >> (16 * (st % 2))), f.a[h]);
    }
  }
  if constexpr (!NV) {  // group r = 2u + p: codes of rows g, g + 8 at bytes 2r, 2r + 1
    const uint32_t word_r = u == 0 ? sc.x : sc.y;
    f.sg = p == 0 ? mxfp4_scale<0>(word_r) : mxfp4_scale<16>(word_r);
    f.sg8 = p == 0 ? mxfp4_scale<8>(word_r) : mxfp4_scale<24>(word_r);
  }
  return f;
}

// chunk (+)= the pair's products with B registers bv (step 4u + 2p: x, y; the next: z, w):
// NVFP4 chained in the tensor core; MXFP4 the group's two steps from zero, then chunk =
// fma(group scale, group sum, chunk).
template <bool NV>
__device__ inline void frag_pair_mma(const FragPair& f, const uint4& bv, float (&chunk)[4]) {
  if constexpr (NV) {
    mma_m16n8k16_f16(chunk, f.a[0], bv.x, bv.y);
    mma_m16n8k16_f16(chunk, f.a[1], bv.z, bv.w);
  } else {
    float d[4];
    mma_m16n8k16_f16<true>(d, f.a[0], bv.x, bv.y);
    mma_m16n8k16_f16(d, f.a[1], bv.z, bv.w);
    chunk[0] = __fmaf_rn(f.sg, d[0], chunk[0]);
    chunk[1] = __fmaf_rn(f.sg, d[1], chunk[1]);
    chunk[2] = __fmaf_rn(f.sg8, d[2], chunk[2]);
    chunk[3] = __fmaf_rn(f.sg8, d[3], chunk[3]);
  }
}

// acc = fma(s_a, chunk, acc) for lane t's D columns 2t, 2t + 1 (act_scale: the n8 tile's 8
// column scales of the chunk), NVFP4 times 2^14 (the placement's 2^-14; MXFP4 has it in
// its block scale).
template <bool NV>
__device__ inline void frag_chunk_scaled(const float* act_scale, const float (&chunk)[4], float (&acc)[4]) {
  constexpr float kUnplace = NV ? 16384.0f : 1.0f;
  const int t = threadIdx.x % 4;
  const float sa[2] = {act_scale[2 * t] * kUnplace, act_scale[2 * t + 1] * kUnplace};
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = __fmaf_rn(sa[i % 2], chunk[i], acc[i]);
}

// ---- activations ----

// §4.9 per 128-block of x [rows, K]: the e4m3 values q as fp16 in the B-fragment order and
// the block's power-of-two scale s (x ~ q s): row r, chunk c, lane t's 64 bytes at half
// r K + 128c + 32t: step st (0-7) at + 4st: k-slots {2t, 2t+1, 2t+8, 2t+9} of K 128c + 16st.
// ActOrder::k: the same values in K order instead (element k of row r at r K + k; the
// wgmma prefill kernel's, expert_fp4_gemm.cuh).
enum class ActOrder { fragment, k };
void act_fp16_rows(const float* x, int64_t rows, int64_t K, __half* q, float* s, cudaStream_t stream,
                   ActOrder order = ActOrder::fragment);

// ---- the expert kernel ----

struct FragArgs {
  MmaArgs mma;                 // tiles, act_div, m, k, out, wt, limit (mma.act unused)
  const int32_t* sel;          // the slots' expert ids (the tiles' experts: sel[slot[8i]])
  const ExpertFrag* experts;   // [n_experts], relaid
  const __half* act;           // act_fp16_rows of the activation rows
  const float* act_scale;      // [rows, K / 128]
};

// The engine's ring (CudaOps::moe): 2 slots of 4.3 KiB (2 KiB of them weights) a warp:
// 77 KiB a block, two blocks an SM, 32 KiB of weights in flight an SM. Ring 2 measured
// 1-6% faster than ring 3 at 1-8 rows for every variant, recipe and projection
// (bench/results/2026-12-02_dev_moe_25b92ba_h200.txt; session 8's runs showed the same).
constexpr int kFragRing = 2;


// The up (nw 2: w1, w3, SwiGLU; items of 16 rows) or down (nw 1: w2; items of 32 rows)
// projection of the tiles, every expert of recipe nv; tiles_max bounds the call's tiles.
// ring: cp.async slots a warp (2-4).
// variant: FragVariant, on experts relaid in codes_of(variant).
void launch_expert_fp4(int nw, bool nv, int ring, const FragArgs& a, int64_t tiles_max, int device,
                       cudaStream_t stream, FragVariant variant = kFragVariant);

}  // namespace dsv4::cuda
