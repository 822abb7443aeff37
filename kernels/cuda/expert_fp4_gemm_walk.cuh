// The chunk walk of the prefill routed-expert GEMM on the fragment layout
// (expert_fp4_gemm.cuh), shared by its two kernels: the mma.sync kernel
// (expert_fp4_gemm.cu, MmaSyncPolicy) and the wgmma kernel (sm90a/expert_fp4_wgmma.cu,
// WgmmaPolicy). Everything but the multiply of one chunk and the activations' place in a
// stage is here: the work list, the cp.async ring, the K order's folds and the epilogue.
//
// Block = 16 warps, one resident a multiprocessor, walking items (tile, 128 output rows up
// / 256 down) blockIdx.x, + gridDim.x, ...; warp w owns one 16-row block of the item (up:
// w1's rows 16 (w % 8) .. for w < 8, the same rows of w3 for w >= 8; down: w2's rows
// 16w ..) against all the tile's used n8 tiles, walking K's 128-chunks ascending. A
// 4-stage cp.async ring holds per chunk the 16 warps' code units and scales (16 KiB + 2 /
// 1 KiB: 3 chunks, ~54 KiB of weights in flight a multiprocessor) and the tile's
// activations (fp16, 256 B a slot: up to 16 KiB, read by every warp; laid out as the
// policy's multiply reads them), one barrier a chunk.
//
// The K order of an output (row, slot) is the decode kernel's (expert_fp4.cu): within a
// chunk its products chained as frag_pair_mma / frag_chunk_scaled chain them, into acc
// (the policy's chunk); at the end of decode warp r's chunk range [partial_chunks(r),
// partial_chunks(r + 1)) acc is added to the output's total (total = acc for r = 0, total
// + acc after; an empty range adds its +0 as decode's idle warp does) and restarts from
// zero; the total times weight_scale_2. The totals live in shared memory (touched 8 times
// an item), so a lane holds two accumulator sets (chunk and acc: 64 registers), not three.
//
// A policy P gives: kActU4 (a stage's activation area, uint4), act_at(col, piece) (where
// the 16-byte piece `piece` of column col's 256 chunk bytes, as the activation rows hold
// them, lands in it), staged() (a thread's landed copies made visible to the multiply,
// before the chunk's barrier) and chunk<NV>(stage, warp, active, group_active, used, acc)
// (acc[n] += the chunk's products of the warp's rows with n8 tile n < used; active: the
// warp's rows are below m, group_active: its warpgroup's first rows are), and kBulkRing:
// false, the ring above (every thread's cp.async, wait_group and a block barrier a
// chunk); true, an mbarrier ring (sm90a/expert_fp4_wgmma.cu WgmmaTmaPolicy: each warp's code units
// by one bulk copy of an elected lane, a "full" and an "empty" mbarrier a stage, no block
// barrier a chunk), whose hooks the policy gives: ring_init(bars), weight_copies<NV>(cp, c,
// stage, full), arrive_copies(full), wait_full(bars, stage, parity), wait_empty(bars,
// stage, parity) and release(bars, stage).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "base/cuda_check.h"
#include "kernels/cuda/expert_fp4_gemm.cuh"
#include "kernels/cuda/expert_gemm.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace dsv4::cuda::fp4_gemm {

using prefill_moe::cp_async;
using prefill_moe::cp_async_commit;
using prefill_moe::cp_async_wait;
using prefill_moe::kTileSlots;

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * kWarp;
constexpr int kNt = kTileSlots / kMmaCols;  // n8 tiles of a tile
constexpr int kChunk = kKChunk;
constexpr int kUnits = kChunk / kFragUnitK;  // code units of a chunk
constexpr int kPieces = kChunk * 2 / 16;     // 16-byte pieces of a column's chunk
constexpr int kStages = 4;                   // chunks in the ring
// Output rows of an item: up, 8 warps x 16 of w1 (and the same of w3); down, 16 x 16 of w2.
template <bool Up>
constexpr int kItemRows = (Up ? kWarps / 2 : kWarps) * kMmaRows;

// One stage (uint4 units): the policy's activations (P::kActU4); the columns' activation
// scales [64] floats; codes [warp][unit][lane]; scales [warp][group g] (16 bytes NVFP4, 8
// MXFP4).
constexpr int kActScaleU4 = kTileSlots * 4 / 16;
constexpr int kCodesU4 = kWarps * kUnits * kWarp;
template <bool NV>
constexpr int kScaleBytes = NV ? 16 : 8;
template <class P, bool NV>
constexpr int kStageU4 = P::kActU4 + kActScaleU4 + kCodesU4 + kWarps * 8 * kScaleBytes<NV> / 16;
// The ring, then the totals [warp][n8 tile][4][lane] floats.
constexpr int kTotals = kWarps * kNt * 4 * kWarp;
// Then the mbarrier ring's full [kStages] and empty [kStages] barriers (kBulkRing).
template <class P>
constexpr int kRingBarriers = P::kBulkRing ? 2 * kStages : 0;
template <class P, bool NV>
constexpr size_t kSmem = size_t{kStages} * kStageU4<P, NV> * sizeof(uint4) + kTotals * sizeof(float) +
                         kRingBarriers<P> * sizeof(uint64_t);

struct Stage {
  uint4* act;
  float* act_scale;
  uint4* codes;
  uint8_t* scales;
};
template <class P, bool NV>
__device__ inline Stage stage_at(uint4* ring, int i) {
  uint4* b = ring + i * kStageU4<P, NV>;
  return {b, reinterpret_cast<float*>(b + P::kActU4), b + P::kActU4 + kActScaleU4,
          reinterpret_cast<uint8_t*>(b + P::kActU4 + kActScaleU4 + kCodesU4)};
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

// f(std::integral_constant<int, T>{}) for the least T of 1 .. kMax with used <= T, kMax
// for every used above kMax - 1: a policy's multiply compiled for its n8 tile count
// (uniform over the block, as used is), chosen by T compares (the jump table of a switch
// took 23 instructions a chunk).
template <int kMax, int T = 1, class F>
__device__ inline void with_tiles(int used, F&& f) {
  if constexpr (T == kMax)
    f(std::integral_constant<int, T>{});
  else if (used <= T)
    f(std::integral_constant<int, T>{});
  else
    with_tiles<kMax, T + 1>(used, f);
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
// (column e / 16, piece e % 16) and, thread i < 64, column i's activation scale (offsets of
// chunk 0; -1: a column with no slot, zero-filled; -2: a column past the tile's last n8
// tile, never read, not staged); its lane's code units and, lanes < 8, its lane group's
// scales (chunk 0; null: the warp's rows are past m).
struct Copies {
  static constexpr int kAct = kTileSlots * kPieces / kThreads;
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
    const int32_t row = source(e / kPieces, a.k / 8);
    cp.act[h] = row >= 0 ? row + e % kPieces : row;
  }
  cp.act_scale = i < kTileSlots ? source(i, chunks) : -2;
  const Fp4Frag& f = warp_matrix<Up>(a.experts[a.tile_expert[tile]], warp);
  const int64_t r0 = m0 + warp_row<Up>(warp), b = r0 / kMmaRows;
  cp.codes = r0 < a.m ? f.codes + b * (a.k / kFragUnitK) * kWarp + lane : nullptr;
  cp.scales = r0 < a.m && lane < 8 ? f.scales + (b * chunks * 8 + lane) * kScaleBytes<NV> : nullptr;
}

// cp.async (PTX ISA "cp.async") of Bytes (16 by .cg, 4 by .ca) global -> shared, zeros
// when code < 0: PTX's ignore-src predicate set from the copy's code in the instruction
// (cp_async's size register cost the SASS 3 instructions a copy to derive and test).
template <int Bytes>
__device__ inline void cp_async_unless(void* dst, const void* src, int32_t code) {
  static_assert(Bytes == 16 || Bytes == 4, "the walk copies 16 or 4 bytes");
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if constexpr (Bytes == 16)
    asm volatile("{\n.reg .pred z;\nsetp.lt.s32 z, %2, 0;\ncp.async.cg.shared.global [%0], [%1], 16, z;\n}\n" ::"r"(d),
                 "l"(src), "r"(code));
  else
    asm volatile("{\n.reg .pred z;\nsetp.lt.s32 z, %2, 0;\ncp.async.ca.shared.global [%0], [%1], 4, z;\n}\n" ::"r"(d),
                 "l"(src), "r"(code));
}

// Every thread: its activation copies of chunk c into stage st (a zero-filled copy's
// source is the column's chunk-c place of row 0, never read).
template <class P>
__device__ inline void act_copies(const Fp4GemmArgs& a, const Copies& cp, int c, const Stage& st) {
  const int i = threadIdx.x;
  const auto* act = reinterpret_cast<const uint4*>(a.act);
#pragma unroll
  for (int h = 0; h < Copies::kAct; ++h) {
    const int e = i + h * kThreads;
    if (cp.act[h] != -2)
      cp_async_unless<16>(st.act + P::act_at(e / kPieces, e % kPieces), act + (max(cp.act[h], 0) + c * (kChunk / 8)),
                          cp.act[h]);
  }
  if (cp.act_scale != -2)
    cp_async_unless<4>(st.act_scale + i, a.act_scale + (max(cp.act_scale, 0) + c), cp.act_scale);
}

// Every thread: its activation copies and its lane's code units and scales of chunk c
// into stage st (the cp.async ring).
template <class P, bool NV>
__device__ inline void stage_copies(const Fp4GemmArgs& a, const Copies& cp, int c, const Stage& st) {
  const int i = threadIdx.x, lane = i % kWarp, warp = i / kWarp;
  act_copies<P>(a, cp, c, st);
  if (cp.codes) {
#pragma unroll
    for (int u = 0; u < kUnits; ++u)
      cp_async<16>(st.codes + (warp * kUnits + u) * kWarp + lane, cp.codes + (kUnits * c + u) * kWarp, true);
  }
  if (cp.scales)
    cp_async<kScaleBytes<NV>>(st.scales + (warp * 8 + lane) * kScaleBytes<NV>, cp.scales + c * 8 * kScaleBytes<NV>,
                              true);
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

template <class P, bool Up, bool NV>
__global__ void __launch_bounds__(kThreads, 1) expert_fp4_gemm_kernel(Fp4GemmArgs a, int64_t items) {
  constexpr int S = kStages;
  extern __shared__ uint4 ring[];  // kSmem
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t m_items = (a.m + kItemRows<Up> - 1) / kItemRows<Up>;
  const int chunks = static_cast<int>(a.k / kChunk);
  if (a.tile_count) items = min(items, int64_t{*a.tile_count} * m_items);
  float* totals = reinterpret_cast<float*>(ring + S * kStageU4<P, NV>);
  float* tot = totals + warp * (kNt * 4 * kWarp) + lane;

  // The mbarrier ring's full [S] and empty [S] barriers (kBulkRing).
  uint64_t* bars = reinterpret_cast<uint64_t*>(totals + kTotals);
  if constexpr (P::kBulkRing) P::ring_init(bars);

  // The copy side runs S - 1 steps ahead of the compute side, across items: fill step f
  // (the compute step that reads it) into stage f % S.
  Walk fill{blockIdx.x, 0};
  Copies cp;
  int64_t cp_item = -1;
  auto issue = [&](int64_t f) {  // every thread: fill step f's copies (if any)
    if constexpr (P::kBulkRing) {
      if (fill.it >= items) return;  // uniform; no compute step waits on a fill never made
      const int buf = static_cast<int>(f % S);
      if (f >= S) P::wait_empty(bars, buf, static_cast<int>((f / S - 1) & 1));  // step f - S's reads are done
      if (fill.it != cp_item) item_copies<Up, NV>(a, fill.it, m_items, cp), cp_item = fill.it;
      const Stage st = stage_at<P, NV>(ring, buf);
      act_copies<P>(a, cp, fill.c, st);
      P::template weight_copies<NV>(cp, fill.c, st, bars + buf);
      P::arrive_copies(bars + buf);
      advance(fill, chunks);
    } else {
      if (fill.it < items) {
        if (fill.it != cp_item) item_copies<Up, NV>(a, fill.it, m_items, cp), cp_item = fill.it;
        stage_copies<P, NV>(a, cp, fill.c, stage_at<P, NV>(ring, static_cast<int>(f % S)));
        advance(fill, chunks);
      }
      cp_async_commit();  // possibly empty: the wait counts stay uniform
    }
  };
#pragma unroll 1
  for (int s = 0; s < S - 1; ++s) issue(s);

  // The compute side's item: the tile's slots, used n8 tiles, the warp's rows.
  const int32_t* slots = nullptr;
  int used = 0, r = 0;
  int64_t row0 = 0;
  bool active = false, group_active = false;
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
      group_active = row0 - kMmaRows * (warp % 4) < a.m;  // the warpgroup's first rows
      scale_2 = warp_matrix<Up>(a.experts[a.tile_expert[tile]], warp).scale_2;
      r = 0;
      fold(r, 0, chunks, used, acc, tot);  // decode's idle warps (chunks < 8) before chunk 0
    }
    const int buf = static_cast<int>(s % S);
    if constexpr (P::kBulkRing) {
      P::wait_full(bars, buf, static_cast<int>((s / S) & 1));  // step s's stage has landed
    } else {
      cp_async_wait<S - 2>();
      P::staged();
      __syncthreads();  // step s's stage is complete for every thread; step s - 1's is free
      issue(s + S - 1);
    }
    P::template chunk<NV>(stage_at<P, NV>(ring, buf), warp, active, group_active, used, acc);
    if constexpr (P::kBulkRing) {
      P::release(bars, buf);  // this warp is done with step s's stage
      issue(s + S - 1);       // into step s - 1's stage, once every warp is done with it
    }
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
  // No copy outlives the block: the cp.async ring's tail groups are empty; the mbarrier
  // ring's every fill was waited for by the step that reads it.
  if constexpr (!P::kBulkRing) cp_async_wait<0>();
}

// The policy's kernel for (up, nv) over a's tiles (launch_expert_fp4_gemm checked the shapes).
template <class P>
void launch_walk(bool up, bool nv, const Fp4GemmArgs& a, int device, cudaStream_t stream) {
  auto run = [&](auto up_c, auto nv_c) {
    constexpr bool Up = decltype(up_c)::value, NV = decltype(nv_c)::value;
    static_assert(kSmem<P, NV> <= 227 * 1024, "one block a multiprocessor");
    constexpr auto kernel = expert_fp4_gemm_kernel<P, Up, NV>;
    const int64_t items = a.tiles_max * ((a.m + kItemRows<Up> - 1) / kItemRows<Up>);
    const int64_t blocks = resident_grid<kernel, kSmem<P, NV>, kThreads>(items, device);
    if (blocks <= 0) return;
    kernel<<<static_cast<unsigned>(blocks), kThreads, kSmem<P, NV>, stream>>>(a, items);
    DSV4_CUDA_LAUNCH_CHECK();
  };
  using T = std::true_type;
  using F = std::false_type;
  if (up)
    nv ? run(T{}, T{}) : run(T{}, F{});
  else
    nv ? run(F{}, T{}) : run(F{}, F{});
}

// The wgmma kernels' launches (sm90a/expert_fp4_wgmma.cu, a compute capability 9.0
// device): on the cp.async ring, and (tma) on the mbarrier ring.
void launch_wgmma(bool up, bool nv, const Fp4GemmArgs& a, int device, cudaStream_t stream);
void launch_wgmma_tma(bool up, bool nv, const Fp4GemmArgs& a, int device, cudaStream_t stream);

}  // namespace dsv4::cuda::fp4_gemm
