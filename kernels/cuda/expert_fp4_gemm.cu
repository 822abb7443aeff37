// The prefill routed-expert GEMM on the fragment layout (expert_fp4_gemm.cuh).
//
// Block = 16 warps, one resident a multiprocessor, walking items (tile, 128 output rows up
// / 256 down) blockIdx.x, + gridDim.x, ...; warp w owns one 16-row block of the item (up:
// w1's rows 16 (w % 8) .. for w < 8, the same rows of w3 for w >= 8; down: w2's rows
// 16w ..) against all the tile's used n8 tiles, walking K's 128-chunks ascending. A
// 4-stage cp.async ring holds per chunk the 16 warps' code units and scales (16 KiB + 2 /
// 1 KiB: 3 chunks, ~54 KiB of weights in flight a multiprocessor) and the tile's
// activations (fp16 B order, 256 B a slot: up to 16 KiB, read by every warp), one
// barrier a chunk. A lane decodes each of its A fragments once (frag_step_pair) and feeds
// it to one mma per used n8 tile.
//
// The K order of an output (row, slot) is the decode kernel's (expert_fp4.cu): within a
// chunk its products chained as frag_pair_mma / frag_chunk_scaled chain them, into acc;
// at the end of decode warp r's chunk range [partial_chunks(r), partial_chunks(r + 1)) acc
// is added to the output's total (total = acc for r = 0, total + acc after; an empty
// range adds its +0 as decode's idle warp does) and restarts from zero; the total times
// weight_scale_2. The totals live in shared memory (touched 8 times an item), so a lane
// holds two accumulator sets (chunk and acc: 64 registers), not three.
#include "kernels/cuda/expert_fp4_gemm.cuh"

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/expert_gemm.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace dsv4::cuda {

namespace {

using prefill_moe::cp_async;
using prefill_moe::cp_async_commit;
using prefill_moe::cp_async_wait;
using prefill_moe::kTileSlots;

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * kWarp;
constexpr int kNt = kTileSlots / kMmaCols;  // n8 tiles of a tile
constexpr int kChunk = kKChunk;
constexpr int kUnits = kChunk / kFragUnitK;  // code units of a chunk
constexpr int kStages = 4;                   // chunks in the ring
// Output rows of an item: up, 8 warps x 16 of w1 (and the same of w3); down, 16 x 16 of w2.
template <bool Up>
constexpr int kItemRows = (Up ? kWarps / 2 : kWarps) * kMmaRows;

// One stage (uint4 units): activations [p 4][col 64][t 4] (lane t's uint4 p of column col:
// steps 2p, 2p + 1), each p plane padded by 2 (a staging thread's 8 neighbours (t, p) land
// on distinct banks; a reading warp's 32 lanes (g, t) read 512 contiguous bytes); the
// columns' activation scales [64] floats; codes [warp][unit][lane]; scales [warp][group g]
// (16 bytes NVFP4, 8 MXFP4).
constexpr int kActPlane = kTileSlots * 4 + 2;
constexpr int kActU4 = 4 * kActPlane;
constexpr int kActScaleU4 = kTileSlots * 4 / 16;
constexpr int kCodesU4 = kWarps * kUnits * kWarp;
template <bool NV>
constexpr int kScaleBytes = NV ? 16 : 8;
template <bool NV>
constexpr int kStageU4 = kActU4 + kActScaleU4 + kCodesU4 + kWarps * 8 * kScaleBytes<NV> / 16;
// The ring, then the totals [warp][n8 tile][4][lane] floats.
constexpr int kTotals = kWarps * kNt * 4 * kWarp;
template <bool NV>
constexpr size_t kSmem = size_t{kStages} * kStageU4<NV> * sizeof(uint4) + kTotals * sizeof(float);
static_assert(kSmem<true> <= 227 * 1024 && kSmem<false> <= 227 * 1024, "one block a multiprocessor");

struct Stage {
  uint4* act;
  float* act_scale;
  uint4* codes;
  uint8_t* scales;
};
template <bool NV>
__device__ inline Stage stage_at(uint4* ring, int i) {
  uint4* b = ring + i * kStageU4<NV>;
  return {b, reinterpret_cast<float*>(b + kActU4), b + kActU4 + kActScaleU4,
          reinterpret_cast<uint8_t*>(b + kActU4 + kActScaleU4 + kCodesU4)};
}

// Warp w's projection and first row in an item (rows from m0).
template <bool Up>
__device__ inline const Fp4Frag& warp_matrix(const ExpertFrag& e, int w) {
  if constexpr (Up) return w < kWarps / 2 ? e.w1 : e.w3;
  else return e.w2;
}
template <bool Up>
__device__ inline int warp_row(int w) {
  return kMmaRows * (Up ? w % (kWarps / 2) : w);
}

// A block's walk: item `it` (>= items: past its last) at chunk c.
struct Walk {
  int64_t it;
  int c;
};
__device__ inline void advance(Walk& s, int chunks) {
  if (++s.c == chunks) s.it += gridDim.x, s.c = 0;
}

// What one thread copies into every stage of an item: activation pieces e = i, i + 512
// (column e / 16, lane t = e % 16 / 4's uint4 p = e % 4) and, thread i < 64, column i's
// activation scale (offsets of chunk 0; -1: a column with no slot, zero-filled; -2: a
// column past the tile's last n8 tile, never read, not staged); its lane's code units
// and, lanes < 8, its lane group's scales (chunk 0; null: the warp's rows are past m).
struct Copies {
  static constexpr int kAct = kTileSlots * 16 / kThreads;
  int32_t act[kAct];  // in uint4 of act (launch checks the range)
  int32_t act_scale;  // in floats of act_scale
  const uint4* codes;
  const uint8_t* scales;
};

template <bool Up, bool NV>
__device__ inline void item_copies(const Fp4GemmArgs& a, int64_t it, int64_t m_items, Copies& cp) {
  const int i = threadIdx.x, lane = i % kWarp, warp = i / kWarp;
  const int64_t tile = it / m_items, m0 = it % m_items * kItemRows<Up>;
  const int32_t* slots = a.tile_slot + tile * kTileSlots;
  const int64_t chunks = a.k / kChunk;
  auto source = [&](int col, int64_t per_row) -> int32_t {
    const int32_t s = slots[col];
    return slots[col & ~(kMmaCols - 1)] < 0 ? -2 : s < 0 ? -1 : static_cast<int32_t>(s / a.act_div * per_row);
  };
#pragma unroll
  for (int h = 0; h < Copies::kAct; ++h) {
    const int e = i + h * kThreads;
    const int32_t row = source(e / 16, a.k / 8);
    cp.act[h] = row >= 0 ? row + e % 16 : row;
  }
  cp.act_scale = i < kTileSlots ? source(i, chunks) : -2;
  const Fp4Frag& f = warp_matrix<Up>(a.experts[a.tile_expert[tile]], warp);
  const int64_t r0 = m0 + warp_row<Up>(warp), b = r0 / kMmaRows;
  cp.codes = r0 < a.m ? f.codes + b * (a.k / kFragUnitK) * kWarp + lane : nullptr;
  cp.scales = r0 < a.m && lane < 8 ? f.scales + (b * chunks * 8 + lane) * kScaleBytes<NV> : nullptr;
}

// Every thread: its copies of chunk c into stage st.
template <bool NV>
__device__ inline void stage_copies(const Fp4GemmArgs& a, const Copies& cp, int c, const Stage& st) {
  const int i = threadIdx.x, lane = i % kWarp, warp = i / kWarp;
  const auto* act = reinterpret_cast<const uint4*>(a.act);
#pragma unroll
  for (int h = 0; h < Copies::kAct; ++h) {
    const int e = i + h * kThreads, col = e / 16, t = e % 16 / 4, p = e % 4;
    if (cp.act[h] != -2)
      cp_async<16>(st.act + p * kActPlane + col * 4 + t, act + (cp.act[h] >= 0 ? cp.act[h] + c * (kChunk / 8) : 0),
                   cp.act[h] >= 0);
  }
  if (cp.act_scale != -2)
    cp_async<4>(st.act_scale + i, a.act_scale + (cp.act_scale >= 0 ? cp.act_scale + c : 0), cp.act_scale >= 0);
  if (cp.codes) {
#pragma unroll
    for (int u = 0; u < kUnits; ++u)
      cp_async<16>(st.codes + (warp * kUnits + u) * kWarp + lane, cp.codes + (kUnits * c + u) * kWarp, true);
  }
  if (cp.scales)
    cp_async<kScaleBytes<NV>>(st.scales + (warp * 8 + lane) * kScaleBytes<NV>, cp.scales + c * 8 * kScaleBytes<NV>,
                              true);
}

// One 16-byte shared-memory load (PTX ld.shared.v4): a warp's 32 lanes reading 512
// contiguous bytes take 4 wavefronts; left to itself the compiler splits the B load into
// two 8-byte loads (x, y for one step, z, w for the next), 8 wavefronts, and the B reads
// (512 bytes for every two mma) are what the shared-memory pipe carries most.
__device__ inline uint4 lds128(const uint4* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p)))
               : "memory");
  return v;
}

// acc[n] += chunk's products of warp `warp`'s rows with the tile's n8 tile n (n < used).
template <bool NV>
__device__ inline void gemm_chunk(const Stage& st, int warp, int used, float (&acc)[kNt][4]) {
  using Scales = std::conditional_t<NV, uint4, uint2>;
  const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  float chunk[kNt][4] = {};
  const Scales sc = reinterpret_cast<const Scales*>(st.scales)[warp * 8 + g];
#pragma unroll
  for (int u = 0; u < kUnits; ++u) {
    const uint4 unit = st.codes[(warp * kUnits + u) * kWarp + lane];
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const FragPair f = frag_step_pair<NV>(unit, sc, u, p);
      const uint4* b = st.act + (2 * u + p) * kActPlane + g * 4 + t;  // column 8n + g, lane t
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
        if (n >= used) break;  // uniform over the block
        frag_pair_mma<NV>(f, lds128(b + n * kMmaCols * 4), chunk[n]);
      }
    }
  }
#pragma unroll
  for (int n = 0; n < kNt; ++n) {
    if (n >= used) break;
    frag_chunk_scaled<NV>(st.act_scale + n * kMmaCols, chunk[n], acc[n]);
  }
}

// Partials r.. whose chunk range ends at or before chunk `done` (the chunks walked): each
// into the totals (tot: the lane's, entry (n, i) at tot[(4n + i) 32]) and acc restarted.
__device__ inline void fold(int& r, int done, int chunks, int used, float (&acc)[kNt][4], float* tot) {
  for (; r < kKWarps && partial_chunks(r + 1, chunks) <= done; ++r)
#pragma unroll
    for (int n = 0; n < kNt; ++n) {
      if (n >= used) break;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float& v = tot[(4 * n + i) * kWarp];
        v = r == 0 ? acc[n][i] : v + acc[n][i];
        acc[n][i] = 0.0f;
      }
    }
}

template <bool Up, bool NV>
__global__ void __launch_bounds__(kThreads, 1) expert_fp4_gemm_kernel(Fp4GemmArgs a, int64_t items) {
  constexpr int S = kStages;
  extern __shared__ uint4 ring[];  // kSmem
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t m_items = (a.m + kItemRows<Up> - 1) / kItemRows<Up>;
  const int chunks = static_cast<int>(a.k / kChunk);
  if (a.tile_count) items = min(items, int64_t{*a.tile_count} * m_items);
  float* totals = reinterpret_cast<float*>(ring + S * kStageU4<NV>);
  float* tot = totals + warp * (kNt * 4 * kWarp) + lane;

  // The copy side runs S - 1 steps ahead of the compute side, across items.
  Walk fill{blockIdx.x, 0};
  Copies cp;
  int64_t cp_item = -1;
  auto issue = [&](int buf) {  // every thread: the fill step's copies (if any), one group
    if (fill.it < items) {
      if (fill.it != cp_item) item_copies<Up, NV>(a, fill.it, m_items, cp), cp_item = fill.it;
      stage_copies<NV>(a, cp, fill.c, stage_at<NV>(ring, buf));
      advance(fill, chunks);
    }
    cp_async_commit();  // possibly empty: the wait counts stay uniform
  };
#pragma unroll 1
  for (int s = 0; s < S - 1; ++s) issue(s);

  // The compute side's item: the tile's slots, used n8 tiles, the warp's rows.
  const int32_t* slots = nullptr;
  int used = 0, r = 0;
  int64_t row0 = 0;
  bool active = false;
  float scale_2 = 1.0f;
  float acc[kNt][4] = {};
  Walk at{blockIdx.x, 0};
#pragma unroll 1
  for (int64_t s = 0; at.it < items; ++s) {
    if (at.c == 0) {  // uniform over the block
      const int64_t tile = at.it / m_items;
      slots = a.tile_slot + tile * kTileSlots;
      const int n = __popc(__ballot_sync(kFullMask, slots[lane] >= 0)) +
                    __popc(__ballot_sync(kFullMask, slots[lane + kWarp] >= 0));
      used = (n + kMmaCols - 1) / kMmaCols;
      row0 = at.it % m_items * kItemRows<Up> + warp_row<Up>(warp);
      active = row0 < a.m;
      scale_2 = warp_matrix<Up>(a.experts[a.tile_expert[tile]], warp).scale_2;
      r = 0;
      fold(r, 0, chunks, used, acc, tot);  // decode's idle warps (chunks < 8) before chunk 0
    }
    cp_async_wait<S - 2>();
    __syncthreads();  // step s's stage is complete for every thread; step s - 1's is free
    issue(static_cast<int>((s + S - 1) % S));
    if (active) gemm_chunk<NV>(stage_at<NV>(ring, static_cast<int>(s % S)), warp, used, acc);
    fold(r, at.c + 1, chunks, used, acc, tot);
    if (at.c + 1 == chunks) {  // the item's outputs: lane (g, t)'s entry (n, i) is row g (+ 8
                               // for i >= 2), column 8n + 2t + i % 2
      if constexpr (Up) __syncthreads();  // warp w + 8's w3 totals are written
      if (active && (!Up || warp < kWarps / 2)) {
        const float* tot3 = tot + kWarps / 2 * (kNt * 4 * kWarp);
        const float scale_3 = Up ? warp_matrix<Up>(a.experts[a.tile_expert[at.it / m_items]], warp + kWarps / 2).scale_2
                                 : 1.0f;
#pragma unroll
        for (int n = 0; n < kNt; ++n) {
          if (n >= used) break;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int32_t slot = slots[n * kMmaCols + 2 * t + i % 2];
            if (slot < 0) continue;
            const float v = tot[(4 * n + i) * kWarp] * scale_2;  // §3.7 weight_scale_2 (1 for MXFP4)
            float* o = a.out + slot * a.m + row0 + g + 8 * (i / 2);
            if constexpr (Up)
              *o = swiglu(v, tot3[(4 * n + i) * kWarp] * scale_3, a.wt[slot], a.limit);
            else
              *o = v;
          }
        }
      }
      if constexpr (Up) __syncthreads();  // the w3 totals are read before the next item's folds
    }
    advance(at, chunks);
  }
  cp_async_wait<0>();  // no copy outlives the block (the ring's tail groups are empty)
}

template <bool Up, bool NV>
void launch_gemm(const Fp4GemmArgs& a, int device, cudaStream_t stream) {
  constexpr auto kernel = expert_fp4_gemm_kernel<Up, NV>;
  const int64_t items = a.tiles_max * ((a.m + kItemRows<Up> - 1) / kItemRows<Up>);
  const int64_t blocks = resident_grid<kernel, kSmem<NV>, kThreads>(items, device);
  if (blocks <= 0) return;
  kernel<<<static_cast<unsigned>(blocks), kThreads, kSmem<NV>, stream>>>(a, items);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_expert_fp4_gemm(bool up, bool nv, const Fp4GemmArgs& a, int device, cudaStream_t stream) {
  if (a.m <= 0 || a.k <= 0 || a.m % kMmaRows != 0 || a.k % kChunk != 0)
    throw Error(cat("expert_fp4_gemm: a ", a.m, " x ", a.k, " projection is not whole ", kMmaRows, " x ", kChunk,
                    " blocks"));
  // A slot's activation offset in 32 bits: at most tiles_max x 64 slots (Copies).
  if (a.tiles_max * kTileSlots * (a.k / 8) > INT32_MAX)
    throw Error(cat("expert_fp4_gemm: ", a.tiles_max, " tiles of ", a.k, "-wide activations exceed 32-bit offsets"));
  if (up)
    nv ? launch_gemm<true, true>(a, device, stream) : launch_gemm<true, false>(a, device, stream);
  else
    nv ? launch_gemm<false, true>(a, device, stream) : launch_gemm<false, false>(a, device, stream);
}

namespace {

// routed_fp4_gemm's scratch in floats, each part 32-byte aligned: xq [rows, H] halves, xs
// [rows, H / 128], h [S, I], hq [S, I] halves, hs [S, I / 128] (S = rows k slots).
std::array<int64_t, 5> scratch_parts(int64_t rows, int k, int64_t hidden, int64_t inter) {
  const int64_t slots = rows * k;
  return {rows * hidden / 2, rows * hidden / kChunk, slots * inter, slots * inter / 2, slots * inter / kChunk};
}

}  // namespace

int64_t routed_fp4_gemm_scratch(int64_t rows, int k, int64_t hidden, int64_t inter) {
  int64_t n = 0;
  for (int64_t part : scratch_parts(rows, k, hidden, inter)) n += prefill_moe::padded8(part);
  return n;
}

void routed_fp4_gemm(const RoutedFp4Gemm& c, float* scratch, float* y, int device, cudaStream_t stream) {
  const std::array<int64_t, 5> parts = scratch_parts(c.rows, c.k, c.hidden, c.inter);
  float* p = scratch;
  auto take = [&p](int64_t n) { return std::exchange(p, p + prefill_moe::padded8(n)); };
  auto* xq = reinterpret_cast<__half*>(take(parts[0]));
  float *xs = take(parts[1]), *h = take(parts[2]);
  auto* hq = reinterpret_cast<__half*>(take(parts[3]));
  float* hs = take(parts[4]);
  act_fp16_rows(c.x, c.rows, c.hidden, xq, xs, stream);
  Fp4GemmArgs a{c.experts, c.tile_expert, c.tile_slot, c.tile_count, c.tiles_max, xq,
                xs,        c.k,           c.inter,     c.hidden,     h,           c.wt, c.limit};
  launch_expert_fp4_gemm(true, c.nv, a, device, stream);
  act_fp16_rows(h, int64_t{c.rows} * c.k, c.inter, hq, hs, stream);  // re-quantized after the weight (§4.23)
  a.act = hq;
  a.act_scale = hs;
  a.act_div = 1;
  a.m = c.hidden;
  a.k = c.inter;
  a.out = y;
  launch_expert_fp4_gemm(false, c.nv, a, device, stream);
}

}  // namespace dsv4::cuda
