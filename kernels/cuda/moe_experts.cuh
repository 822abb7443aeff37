// The decode MoE's routed-expert kernel (MODEL.md §4.23; moe.cu: expert_mma_kernel and
// its compile-time variants, expert_kernel.h): the call's work list (Tiles), the kernel's
// arguments, and the two pieces every variant runs — the tensor-core product of one
// 128-element K chunk and the per-item epilogue — so the variants feed the same products
// in the same K order and combine the same partials: their bits agree on every input.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/expert_kernel.h"
#include "kernels/cuda/expert_mma.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace dsv4::cuda {

constexpr int kExpertThreads = kKWarps * kWarp;  // warp w holds the K partial of chunks w, w + 8, ...

// The call's work list: tile i is the expert w[i] applied to the slots slot[i*kMmaCols ..]
// (ascending, -1 past the expert's last), count tiles in all; an expert's slots fill
// ceil(n / 8) tiles. The tile holds its expert's weights itself, so the expert kernel
// reaches them in one dependent load, not two.
struct Tiles {
  ExpertW* w;      // [max_tiles]
  int32_t* count;  // [1]
  int32_t* slot;   // [max_tiles * kMmaCols]
};

// The most tiles `slots` slots of n_experts experts can need: sum_e ceil(c_e / 8) <=
// (slots + 7 * distinct) / 8, and never more than one per slot.
inline int64_t max_tiles(int64_t slots, int64_t n_experts) {
  return std::min(slots, (slots + 7 * std::min(slots, n_experts) + kMmaCols - 1) / kMmaCols);
}

struct MmaArgs {
  Tiles tiles;
  const float* act;  // slot s's activation row: act + (s / act_div) * K
  int act_div;       // k (up: the slot's token row) or 1 (down: the slot's own h)
  int64_t m, k;      // weight rows (outputs) and columns
  float* out;        // [slots, m]: h (up) or the expert's output (down)
  const float* wt;   // up: routing weight [slots]
  float limit;       // up: SwiGLU clamp, <= 0 off (D16)
};

// x[0 .. 8): two float4 loads (16-byte aligned x), else scalar loads (same values).
__device__ inline void load8(const float* x, float (&v)[8]) {
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const float4 p = *reinterpret_cast<const float4*>(x), q = *reinterpret_cast<const float4*>(x + 4);
    v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w, v[4] = q.x, v[5] = q.y, v[6] = q.z, v[7] = q.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = x[i];
  }
}

// How chunk_product decodes the e2m1 codes: by the prmt lookups (e2m1x8_to_bf16x2) or
// placed and multiplied by 2^126 (e2m1x8_to_bf16x2_placed): the same A fragments.
enum class Fp4Decode { lookup, placed };

// acc[j] += the chunk's products for projection j: lane (g, t)'s runs raw[j][h] (row
// m0 + g + 8h at k0 = 128c + 32t, its two half scale codes sc[j][h]) against column g's
// activation x = a_g + k0 (null for a zero column: zeros; any alignment). Word q of the
// run gives steps 2q and 2q + 1 (a_fragments), each P mma (one per activation plane): the
// K order of the chunk.
template <int NW, int P, Fp4Decode kDecode = Fp4Decode::lookup>
__device__ inline void chunk_product(const Fp4W (&w)[NW], const uint32_t (&raw)[NW][2][4],
                                     const uint8_t (&sc)[NW][2][2], const float* x, float (&acc)[NW][4]) {
  __nv_bfloat162 s[NW][2][2];
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) scale_pairs(w[j], sc[j][h], s[j][h]);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float xv[8] = {};
    if (x) load8(x + 8 * q, xv);
    uint32_t b[2][2][P];  // [step 2q + st][register][plane]
#pragma unroll
    for (int st = 0; st < 2; ++st)
#pragma unroll
      for (int i = 0; i < 2; ++i) bf16x2_planes<P>(xv[2 * st + i], xv[2 * st + i + 4], b[st][i]);
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      uint32_t frag[2][4];
      a_fragments<kDecode == Fp4Decode::placed>(raw[j][0][q], raw[j][1][q], s[j][0][q / 2], s[j][1][q / 2], frag);
#pragma unroll
      for (int st = 0; st < 2; ++st)
#pragma unroll
        for (int p = 0; p < P; ++p) mma_m16n8k16_bf16(acc[j], frag[st], b[st][0][p], b[st][1][p]);
    }
  }
}

// What a work item on tile `tile` starts from in lane (g, t): the tile's slots and
// projections, column g's activation row x (null for a zero column), the log2 of each
// projection's scale group (16 NVFP4, 32 MXFP4: a run holds two groups or one) and zeroed
// accumulators.
template <int NW>
struct TileItem {
  const int32_t* slots;
  Fp4W w[NW];
  const float* x;
  int gs[NW];
  float acc[NW][4];
  __device__ TileItem(const MmaArgs& a, int64_t tile) : slots(a.tiles.slot + tile * kMmaCols) {
    projections<NW>(a.tiles.w[tile], w);
    const int32_t col = slots[threadIdx.x % kWarp / 4];
    x = col >= 0 ? a.act + (col / a.act_div) * a.k : nullptr;
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      gs[j] = __ffs(w[j].group) - 1;
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    }
  }
};

// The item's outputs from the 8 warps' accumulators (rows m0 .. m0 + 15 of the tile's
// slots): the partials added in warp order, times weight_scale_2; up: h = swiglu(g, u) at
// once (§4.23). Ends with `part` read by the first 4 warps (the caller syncs before reuse).
template <int NW>
__device__ inline void tile_epilogue(const MmaArgs& a, const int32_t* slots, const Fp4W (&w)[NW], int64_t m0,
                                     const float (&acc)[NW][4], float (&part)[kKWarps][NW][4][kWarp]) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) part[warp][j][i][lane] = acc[j][i];
  __syncthreads();
  // Thread (j, i, l): accumulator i of lane l, i.e. row l / 4 (+ 8 for i >= 2), column
  // 2 (l % 4) + i % 2 of the mma's D fragment.
  if (threadIdx.x < 4 * kWarp) {
    const int i = threadIdx.x / kWarp, l = threadIdx.x % kWarp;
    const int32_t slot = slots[2 * (l % 4) + i % 2];
    if (slot >= 0) {
      float v[NW];
#pragma unroll
      for (int j = 0; j < NW; ++j) {
        v[j] = part[0][j][i][l];
        for (int p = 1; p < kKWarps; ++p) v[j] += part[p][j][i][l];
        v[j] *= w[j].scale_2;  // §3.7 weight_scale_2 (1 for MXFP4)
      }
      const int64_t at = slot * a.m + m0 + l / 4 + 8 * (i / 2);
      if constexpr (NW == 2)
        a.out[at] = swiglu(v[0], v[1], a.wt[slot], a.limit);
      else
        a.out[at] = v[0];
    }
  }
}

// Resident blocks per SM asked of the compiler: <= 128 registers (NW = 2) / <= 85 (NW = 1).
template <int NW>
constexpr int kMinBlocks = NW == 2 ? 2 : 3;

// The compile-time knobs of the shipped kernel (moe.cu expert_mma_kernel): how the e2m1
// codes become bf16 (the same A fragments either way, so the same bits). The placed
// decode is 1-8% faster than the lookup at 1-8 rows on both recipes and both projections
// (dsv4-dev-moe at 3c8d2b5, bench/results/2026-12-02_dev_moe_3c8d2b5_h200.txt). Measured
// there and dropped, each bit for bit the shipped kernel too: 3 or 4 chunks loaded ahead
// (2 kept: kAhead), a walk loading a warp's next group before multiplying the current one
// across items, one more resident block per SM — 10-40% slower (spills or occupancy).
struct MmaKnobs {
  Fp4Decode decode = Fp4Decode::placed;
};
constexpr MmaKnobs kShippedKnobs{};
constexpr int kAhead = 2;  // chunks a warp loads before it multiplies the first (a group)

// The up (nw = 2: w1, w3, SwiGLU) or down (nw = 1: w2) projection of a call's tiles by
// the shipped kernel at `kernel`'s knobs (moe.cu), planes = 1 (bf16-exact activations) or
// 3 (f32); items_max bounds the work items (tiles x m / 16) of the call.
void launch_expert_mma(ExpertKernel kernel, int nw, int planes, const MmaArgs& a, int64_t items_max, int device,
                       cudaStream_t stream);
// The work list of `slots` routed slots (sel: expert ids), on the device (moe.cu); with
// experts null the tiles' w is not written (the fragment kernel reads sel instead).
void group_slots(const int32_t* sel, int slots, const ExpertW* experts, int n_experts, const Tiles& t,
                 cudaStream_t stream);
// The grid of a work-list kernel: the blocks of `kKernel` (kThreads threads, kSmem bytes
// of dynamic shared memory) that fit on the device at once (its occupancy, a property of
// the compiled kernel, asked once), at most `items`.
template <auto kKernel, size_t kSmem, int kThreads = kExpertThreads>
int64_t resident_grid(int64_t items, int device) {
  static const int per_sm = [] {
    DSV4_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
    int n = 0;
    DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kKernel, kThreads, kSmem));
    return n;
  }();
  int sms = 0;
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return std::min<int64_t>(items, int64_t{std::max(per_sm, 1)} * sms);
}

}  // namespace dsv4::cuda
