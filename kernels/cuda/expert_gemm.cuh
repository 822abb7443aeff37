// The routed experts' GEMM of the prefill MoE (issue 13; MODEL.md §4.23):
// expert_gemm_ring_kernel, 16 warps of one 16-row set each, the weights, their scales and
// the activations staged kPStages - 1 chunks ahead by a cp.async ring, one barrier a chunk.
// It feeds every output column decode's products in decode's K order (moe.cu
// tile_product: chunk c into partial c % 8, chunks of a partial ascending with the mma
// chained, the partials added in order, then NVFP4's scale_2), so it equals `moe` bit for
// bit. moe_prefill.cu launches it (launch_expert_gemm); bench/dev/moe_prefill_variants.cu
// times it against a host reference.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/expert_mma.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace dsv4::cuda::prefill_moe {

constexpr int kThreads = 256;  // bf16_planes_kernel's block
constexpr int kPartials = cuda::kKWarps;  // moe.cu's K split: chunk c into partial c % 8
constexpr int kNt = 8;                              // n8 tiles per tile: each A fragment feeds 8 mma
constexpr int kTileSlots = kNt * cuda::kMmaCols;    // 64 slots per tile
constexpr int kChunk = cuda::kKChunk;
constexpr int kGroup = 8;                 // activation elements per 16-byte bf16 group
constexpr int kGroups = kChunk / kGroup;  // groups per column and K chunk (t, q)

// The chunk's tiles: tile i applies expert[i] to slot[i * 64 ..] (ascending, -1 padded),
// experts ascending; an expert with n slots fills ceil(n / 64) tiles. Built on the host
// here (the dev bench); moe_gemm builds the same list on the device (moe_prefill.cu).
struct TileList {
  std::vector<int32_t> ints;  // expert [tiles], then slot [tiles * 64]
  int64_t tiles = 0;
};

inline TileList tile_list(const std::vector<int32_t>& sel, int n_experts, int layer) {
  std::vector<std::vector<int32_t>> by_expert(static_cast<size_t>(n_experts));
  for (size_t s = 0; s < sel.size(); ++s) {
    const int32_t e = sel[s];
    if (e < 0 || e >= n_experts)
      throw Error(cat("moe_gemm: layer ", layer, " selects expert ", e, " outside [0, ", n_experts, ")"));
    by_expert[static_cast<size_t>(e)].push_back(static_cast<int32_t>(s));
  }
  TileList t;
  for (const auto& slots : by_expert) t.tiles += (static_cast<int64_t>(slots.size()) + kTileSlots - 1) / kTileSlots;
  t.ints.assign(static_cast<size_t>(t.tiles * (1 + kTileSlots)), -1);
  int32_t* slot = t.ints.data() + t.tiles;
  int64_t i = 0;
  for (int e = 0; e < n_experts; ++e)
    for (size_t j = 0; j < by_expert[e].size(); ++j) {
      if (j % kTileSlots == 0) t.ints[static_cast<size_t>(i++)] = e;
      slot[(i - 1) * kTileSlots + static_cast<int64_t>(j % kTileSlots)] = by_expert[e][j];
    }
  return t;
}

// The same list built on the device from sel [slots] (moe_prefill.cu: no host round trip
// per layer): expert [max_tiles], slot [max_tiles * 64], count [1] (the tiles written),
// counts [n_experts] (scratch). Ids outside [0, n_experts) join no tile.
struct DeviceTiles {
  int32_t* expert;
  int32_t* slot;
  int32_t* count;
  int32_t* counts;
};
// The most tiles `slots` slots of n_experts experts can need (the device list's bound).
int64_t max_tiles(int64_t slots, int64_t n_experts);
void group_tiles(const int32_t* sel, int64_t slots, int n_experts, const DeviceTiles& t, cudaStream_t stream);

// x [rows, K] f32 -> P bf16 planes [P][rows, K] (cuda::bf16x2_planes), each 8-element group
// stored as the mma B registers of its word (16 bytes): {x0, x4}, {x1, x5}, {x2, x6},
// {x3, x7}, so a lane loads a step pair's B fragment in one 128-bit read.
template <int P>
__global__ void bf16_planes_kernel(const float* x, int64_t n_groups, uint4* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_groups;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float4 a = reinterpret_cast<const float4*>(x)[2 * i], b = reinterpret_cast<const float4*>(x)[2 * i + 1];
    const float v[kGroup] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t w[4][P];
#pragma unroll
    for (int j = 0; j < 4; ++j) cuda::bf16x2_planes<P>(v[j], v[j + 4], w[j]);
#pragma unroll
    for (int p = 0; p < P; ++p) out[p * n_groups + i] = make_uint4(w[0][p], w[1][p], w[2][p], w[3][p]);
  }
}

struct GemmArgs {
  const cuda::ExpertW* experts;  // the block's expert table
  const int32_t* tile_expert;    // [tiles]
  const int32_t* tile_slot;      // [tiles * 64]
  const uint4* act;              // bf16_planes_kernel's planes of the activation rows
  int64_t plane;                 // groups per plane
  int act_div;                   // slot s's activation row: s / act_div (up: k; down: 1)
  int64_t m, k;                  // weight rows (outputs) and columns
  float* out;                    // [slots, m]: h (up) or the expert's output (down)
  const float* wt;               // up: routing weight [slots]
  float limit;                   // up: SwiGLU clamp, <= 0 off (D16)
  // [1] the tiles of a list built on the device (moe_prefill.cu): the walk takes
  // min(items, count * m items); null: `items` counts the list's items (host lists).
  const int32_t* tile_count = nullptr;
};

__device__ inline int64_t walk_items(const GemmArgs& a, int64_t items, int64_t m_items) {
  return a.tile_count ? min(items, int64_t{*a.tile_count} * m_items) : items;
}

// cp.async (PTX ISA "cp.async") of Bytes (16 by .cg, L2 only; 8 and 4 by .ca: .cg takes
// 16 only) global -> shared, zero-filled when !valid. kLine asks L2 for the whole 128-byte
// line (a cache hint: no value depends on it). Then the group commit and the wait for all
// but the newest N groups.
template <int Bytes, bool kLine = false>
__device__ inline void cp_async(void* dst, const void* src, bool valid) {
  static_assert(Bytes == 16 || Bytes == 8 || Bytes == 4, "cp.async copies 4, 8 or 16 bytes");
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int n = valid ? Bytes : 0;
  if constexpr (Bytes == 16 && !kLine)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
  else if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
  else if constexpr (Bytes == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(n));
  else if constexpr (!kLine)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(n));
  else
    asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The chunk after c in the K order: partial c % 8's chunks ascending, partials ascending
// (the decode kernel's warp w = c % 8); -1 after the last.
__device__ inline int next_chunk(int c, int chunks) {
  if (c + kPartials < chunks) return c + kPartials;
  const int r = c % kPartials + 1;
  return r < kPartials && r < chunks ? r : -1;
}

// A stage's activations: [P][q 4] planes of [col 64][t 4] 16-byte B groups, each plane
// padded by 32 bytes. Lane (g, t) of n-tile n reads (q, 8n + g, t): a warp's 32 reads are
// 512 contiguous bytes; a staging thread (col, 4t + q) writes its group, and the pad
// spreads 8 consecutive threads' (q, t) over distinct banks.
constexpr int kPlanePad = 2;                        // uint4 per q plane
constexpr int kPlane = kTileSlots * 4 + kPlanePad;  // uint4 per q plane

// Why a ring (session 5; bench/RESULTS.md "Sixth session": 1.20-1.28x the first kernel,
// which loaded the next chunk's weights into registers, bit for bit equal): the FP4 decode
// (~24 instructions per 8 codes) is most of the issue slots, so with two warps a scheduler
// the latencies (the loads, the dependent prmt chains, the mma) were not hidden. Here the
// weights, their scales and the activations of kPStages - 1 chunks ahead come by cp.async
// (no register waits on global memory), the block meets once per chunk, and 16 warps (four
// per scheduler, <= 128 registers) own one 16-row set each.
constexpr int kPRows = 256;  // weight rows per item (stage rows)
// Output rows per item: up, 128 rows of w1 and of w3 (128 of h); down, 256 of w2.
template <bool Up>
constexpr int kItemRows = Up ? kPRows / 2 : kPRows;
constexpr int kPWarps = kPRows / cuda::kMmaRows;  // 16
constexpr int kPThreads = kPWarps * cuda::kWarp;
constexpr int kRunWords = 4;      // uint4 per weight row and chunk: 128 FP4 codes
constexpr int kScaleBytes = 8;    // per row and chunk: 8 e4m3 codes (NVFP4) or 4 e8m0 (MXFP4)
template <int P>
constexpr int kPStages = P == 1 ? 4 : 2;  // chunks in the ring (shared memory: kPSmem)
// One stage: activations [P][q 4][kPlane], then weights [kPRows][4], then scale codes
// [kPRows][8 bytes] (uint4 units).
template <int P>
constexpr int kPStage = P * 4 * kPlane + kPRows * kRunWords + kPRows * kScaleBytes / 16;
// The ring, then v [kPWarps][kNt][4][lanes] floats: each lane's finished partials' sum.
template <int P>
constexpr size_t kPSmem = size_t{kPStages<P>} * kPStage<P> * sizeof(uint4) +
                          size_t{kPWarps} * kNt * 4 * cuda::kWarp * sizeof(float);
static_assert(kPSmem<1> <= 227 * 1024 && kPSmem<3> <= 227 * 1024, "one block per SM");

// A block's walk: item `it` (it >= items: past its last) at chunk c, in next_chunk order.
struct Step {
  int64_t it;
  int c;
};
__device__ inline void advance(Step& s, int chunks) {
  s.c = next_chunk(s.c, chunks);
  if (s.c < 0) s.it += gridDim.x, s.c = 0;
}

// Stage row R of an item at m0 (R in [0, 256)): up, rows R < 128 are w1's m0 + R, the rest
// w3's m0 + R - 128; down, w2's m0 + R.
template <bool Up>
__device__ inline const Fp4W& stage_matrix(const ExpertW& e, int R) {
  if constexpr (Up) return R < kPRows / 2 ? e.w1 : e.w3;
  else return e.w2;
}
template <bool Up>
__device__ inline int64_t stage_row(int64_t m0, int R) {
  return m0 + (Up ? R % (kPRows / 2) : R);
}
// The first stage row of warp w's set: 16w (up: w1 for w < 8, the same rows of w3 for
// w >= 8).
__device__ inline int set_row(int w) { return cuda::kMmaRows * w; }

// What one thread copies into every stage of an item, h < kPer: activation groups (tq, col
// i / 16 + h * threads / 16) of each plane, 16 weight bytes (piece i % 4) of stage row
// i / 4 + h * threads / 4, and scale word i % 2 of stage row (i + h * threads) / 2 (h <
// kPer / 2). Null source: zero-filled.
struct Copies {
  static constexpr int kPer = kTileSlots * kGroups / kPThreads;  // 2
  int64_t off[kPer];                // activation offsets (-1: zero, -2: not staged)
  const uint8_t* row[kPer];         // packed row starts (null: past m)
  const uint8_t* scale[kPer / 2];   // word i % 2 of the scale row (null: past m)
  int gs[kPer / 2];                 // log2 of the row's scale group
  bool scale_word[kPer / 2];        // the row's chunk has word i % 2 (NVFP4: 2 words, MXFP4: 1)
};

template <bool Up>
__device__ inline void item_copies(const GemmArgs& a, int64_t it, int64_t m_items, Copies& cp) {
  constexpr int T = kPThreads;
  const int i = threadIdx.x;
  const int64_t tile = it / m_items;
  const int64_t m0 = it % m_items * kItemRows<Up>;
  const int32_t* slots = a.tile_slot + tile * kTileSlots;
  const ExpertW& e = a.experts[a.tile_expert[tile]];
#pragma unroll
  for (int h = 0; h < Copies::kPer; ++h) {
    const int col = i / kGroups + h * (T / kGroups);
    const int32_t s = slots[col];
    // A column past the tile's last n-tile is never read: not staged.
    cp.off[h] = slots[col & ~(cuda::kMmaCols - 1)] < 0 ? -2 : s < 0 ? -1 : int64_t{s / a.act_div} * (a.k / kGroup);
    const int R = i / kRunWords + h * (T / kRunWords);
    const Fp4W& w = stage_matrix<Up>(e, R);
    const int64_t r = stage_row<Up>(m0, R);
    cp.row[h] = r < a.m ? w.packed + r * (w.cols >> 1) : nullptr;
  }
#pragma unroll
  for (int h = 0; h < Copies::kPer / 2; ++h) {
    const int Rs = (i + h * T) / 2;
    const Fp4W& ws = stage_matrix<Up>(e, Rs);
    const int64_t rs = stage_row<Up>(m0, Rs);
    cp.gs[h] = __ffs(ws.group) - 1;
    cp.scale_word[h] = 4 * (i % 2) < (kChunk >> cp.gs[h]);
    cp.scale[h] = rs < a.m ? ws.scales + (rs * ws.cols >> cp.gs[h]) + 4 * (i % 2) : nullptr;
  }
}

// Every thread: its copies of chunk c into stage `dst`. The weights' copies (codes and
// scale words) ask L2 for the whole 128-byte line: a row's chunk is 64 bytes and its
// neighbour in the line comes chunks / 8 steps later (next_chunk's order; 4 at K 4096),
// so HBM sees 128-byte requests.
template <int P>
__device__ inline void stage_copies(const GemmArgs& a, const Copies& cp, int c, uint4* dst) {
  constexpr int T = kPThreads;
  constexpr bool kLine = true;
  const int i = threadIdx.x, tq = i % kGroups;
#pragma unroll
  for (int h = 0; h < Copies::kPer; ++h) {
    const int col = i / kGroups + h * (T / kGroups);
    if (cp.off[h] != -2)
#pragma unroll
      for (int p = 0; p < P; ++p)
        cp_async<16>(dst + (p * 4 + tq % 4) * kPlane + col * 4 + tq / 4,
                     a.act + p * a.plane + (cp.off[h] >= 0 ? cp.off[h] : 0) + c * kGroups + tq, cp.off[h] >= 0);
    const int R = i / kRunWords + h * (T / kRunWords), piece = i % kRunWords;
    uint4* wdst = dst + P * 4 * kPlane + R * kRunWords + piece;
    const void* src = cp.row[h] ? cp.row[h] + c * (kChunk / 2) + 16 * piece : static_cast<const void*>(a.experts);
    cp_async<16, kLine>(wdst, src, cp.row[h] != nullptr);
  }
  // Scale words [kPRows][2]: word i + h * T is row (i + h * T) / 2, word i % 2.
  auto* sdst = reinterpret_cast<uint32_t*>(dst + P * 4 * kPlane + kPRows * kRunWords) + i;
#pragma unroll
  for (int h = 0; h < Copies::kPer / 2; ++h)
    if (cp.scale_word[h])
      cp_async<4, kLine>(sdst + h * T,
                         cp.scale[h] ? cp.scale[h] + (c * kChunk >> cp.gs[h]) : static_cast<const void*>(a.experts),
                         cp.scale[h] != nullptr);
}

// Block = (tile, kItemRows weight rows from m0) items, item i + gridDim.x after item i (one
// resident block per SM), each chunk of an item one step of a kPStages-deep ring: at step
// s the block waits for stage s % kPStages, then refills the stage step s - 1 used with
// step s + kPStages - 1 (every thread has passed this step's barrier, so nobody still
// reads it), then computes. Warp w owns the 16 stage rows from set_row(w) and all n-tiles
// (used only while the tile has slots there): per column, lane (g, t) runs moe.cu's
// tile_product sum — the run at 128c + 32t of rows g and g + 8, chunk c into acc (mma
// chained, chunks of a partial ascending), each finished partial into v in partial order
// (v = partial 0, then v += partial r). Up: out = swiglu(w1 sum, w3 sum) (§4.23), warps
// w >= 8 finishing their w3 sums in v at the item's end and warp w - 8 reading them;
// down: the w2 sums.
template <bool Up, int P>
__global__ void __launch_bounds__(kPThreads, 1) expert_gemm_ring_kernel(GemmArgs a, int64_t items) {
  constexpr int S = kPStages<P>, W = kPWarps;
  extern __shared__ uint4 ring[];  // [S][kPStage<P>], then v (kPSmem)
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t m_items = (a.m + kItemRows<Up> - 1) / kItemRows<Up>;
  const int chunks = static_cast<int>(a.k / kChunk);
  const int row0 = set_row(warp);  // the warp's first stage row
  items = walk_items(a, items, m_items);  // a block past it walks nothing

  // The copy side runs S - 1 steps ahead of the compute side.
  Step fill{blockIdx.x, 0};
  Copies cp;
  int64_t cp_item = -1;
  auto issue = [&](int buf) {  // every thread: the fill step's copies (if any), one group
    if (fill.it < items) {
      if (fill.it != cp_item) item_copies<Up>(a, fill.it, m_items, cp), cp_item = fill.it;
      stage_copies<P>(a, cp, fill.c, ring + buf * kPStage<P>);
      advance(fill, chunks);
    }
    cp_async_commit();  // possibly empty: the wait counts stay uniform
  };
#pragma unroll 1
  for (int s = 0; s < S - 1; ++s) issue(s);

  // The compute side's item: the set's matrix, the tile's slots and used n-tiles.
  Fp4W w;
  int64_t m0 = 0;
  const int32_t* slots = nullptr;
  int n_used = 0;
  bool active = false;
  float acc[kNt][4];
#pragma unroll
  for (int n = 0; n < kNt; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
  float* v_lane = reinterpret_cast<float*>(ring + S * kPStage<P>) + lane;
  auto v_at = [&](int wp, int n, int i) -> float& { return v_lane[((wp * kNt + n) * 4 + i) * cuda::kWarp]; };

  Step at{blockIdx.x, 0};
#pragma unroll 1
  for (int64_t s = 0; at.it < items; ++s) {
    if (at.c == 0) {  // the item's first chunk: its warp-side part (uniform over the block)
      const int64_t tile = at.it / m_items;
      m0 = at.it % m_items * kItemRows<Up>;
      slots = a.tile_slot + tile * kTileSlots;
      w = stage_matrix<Up>(a.experts[a.tile_expert[tile]], row0);
      active = stage_row<Up>(m0, row0) < a.m;  // whole warps: m % 32 == 0
      const int used = __popc(__ballot_sync(cuda::kFullMask, slots[lane] >= 0)) +
                       __popc(__ballot_sync(cuda::kFullMask, slots[lane + cuda::kWarp] >= 0));
      n_used = (used + cuda::kMmaCols - 1) / cuda::kMmaCols;
    }
    cp_async_wait<S - 2>();
    __syncthreads();  // step s's stage is complete for every thread; step s - 1's is free
    issue(static_cast<int>((s + S - 1) % S));
    const uint4* st = ring + (s % S) * kPStage<P>;
    if (active) {  // chunk at.c into acc
      const uint4* wst = st + P * 4 * kPlane;
      const auto* sst = reinterpret_cast<const uint8_t*>(wst + kPRows * kRunWords);
      uint32_t raw[2][4];
      __nv_bfloat162 sc[2][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the set
        const int R = row0 + g + 8 * h, gs = __ffs(w.group) - 1;
        const uint4 r = wst[R * kRunWords + t];
        raw[h][0] = r.x, raw[h][1] = r.y, raw[h][2] = r.z, raw[h][3] = r.w;
        const uint8_t code[2] = {sst[R * kScaleBytes + (32 * t >> gs)], sst[R * kScaleBytes + ((32 * t + 16) >> gs)]};
        cuda::scale_pairs(w, code, sc[h]);
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t frag[2][4];
        cuda::a_fragments(raw[0][q], raw[1][q], sc[0][q / 2], sc[1][q / 2], frag);
#pragma unroll
        for (int n = 0; n < kNt; ++n) {
          if (n >= n_used) break;  // uniform over the block
          uint4 b[P];
#pragma unroll
          for (int p = 0; p < P; ++p) b[p] = st[(p * 4 + q) * kPlane + (n * cuda::kMmaCols + g) * 4 + t];
#pragma unroll
          for (int k = 0; k < 2; ++k)
#pragma unroll
            for (int p = 0; p < P; ++p)
              cuda::mma_m16n8k16_bf16(acc[n], frag[k], k ? b[p].z : b[p].x, k ? b[p].w : b[p].y);
        }
      }
    }
    if (at.c + kPartials >= chunks) {  // partial c % 8 is complete: into v in partial order
      const bool first = at.c % kPartials == 0;
#pragma unroll
      for (int n = 0; n < kNt; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float& vi = v_at(warp, n, i);
          vi = first ? acc[n][i] : vi + acc[n][i];
          acc[n][i] = 0.0f;
        }
    }
    if (next_chunk(at.c, chunks) < 0) {  // the item's last chunk: its outputs
      // Accumulator i of lane (g, t): set row g (+ 8 for i >= 2), column 8n + 2t + i % 2.
      // The partials decode's idle warps hold (chunks < 8) add 0.
      auto sum = [&](int n, int i) {
        const float vi = v_at(warp, n, i);
        return (chunks < kPartials ? vi + 0.0f : vi) * w.scale_2;  // §3.7 weight_scale_2 (1 for MXFP4)
      };
      if constexpr (Up) {  // the w3 sums cross warps
        if (active && warp >= W / 2)
#pragma unroll
          for (int n = 0; n < kNt; ++n) {
            if (n >= n_used) break;
#pragma unroll
            for (int i = 0; i < 4; ++i) v_at(warp, n, i) = sum(n, i);
          }
        __syncthreads();  // uniform: every thread is at this item's last step
      }
      if (active && (!Up || warp < W / 2))
#pragma unroll
        for (int n = 0; n < kNt; ++n) {
          if (n >= n_used) break;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int32_t slot = slots[n * cuda::kMmaCols + 2 * t + i % 2];
            if (slot < 0) continue;
            float* o = a.out + slot * a.m + stage_row<Up>(m0, row0 + g + 8 * (i / 2));
            if constexpr (Up)
              *o = cuda::swiglu(sum(n, i), v_at(warp + W / 2, n, i), a.wt[slot], a.limit);
            else
              *o = sum(n, i);
          }
        }
    }
    advance(at, chunks);
  }
  cp_async_wait<0>();  // no copy outlives the block (the ring's tail groups are empty)
}

// ---- launch ----

// One projection family over every tile: the planes of `in` must be written (planes
// kernel) before. Grid: the resident blocks, walking the items with no wave tail (`items`
// a bound where args.tile_count names the list's count on the device).
template <bool Up, int P>
void launch_expert_gemm(const GemmArgs& args, int64_t items, int sm_count, cudaStream_t stream) {
  if (items == 0) return;
  constexpr auto kernel = expert_gemm_ring_kernel<Up, P>;
  constexpr size_t smem = kPSmem<P>;
  const void* fn = reinterpret_cast<const void*>(kernel);
  DSV4_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0;
  DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kPThreads, smem));
  const int64_t blocks = std::min<int64_t>(items, int64_t{std::max(per_sm, 1)} * sm_count);
  kernel<<<static_cast<unsigned>(blocks), kPThreads, smem, stream>>>(args, items);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4::cuda::prefill_moe
