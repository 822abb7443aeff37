// The tensor-core GEMV of the FP8 decode linears (MODEL.md §3.3 L-bf16; issue 12 target 3:
// a verify round of up to 8 rows reads each weight byte once, at about the cost of one row).
//
// A tile is 16 weight rows (the M of mma.m16n8k16) times up to 8 x rows (the N); lane
// (g, t) = (lane / 4, lane % 4) streams weight rows n0 + g and n0 + g + 8 and x row r0 + g
// (a zero column past the call's rows). A warp step is one 128-wide k-block (one FP8 scale
// block): lane t takes the 32-element run at k0 = 128 kb + 32 t, and mma step s (0..7) puts
// its elements k0 + 4s .. k0 + 4s + 3 in the k-slots {2t, 2t+1, 2t+8, 2t+9}, the same ones in
// A and B (any bijection of k inside a step is an order of the sum). Weights are decoded
// exactly to bf16 (TcFp8Run); x as P exact bf16 planes (mma_bf16.cuh bf16x2_planes: 1 for
// bf16-rounded x, 3 for f32), so every product is the CPU reference's product. Per k-block
// the 8 steps chain in one mma accumulator from zero; the block's sum is scaled by its
// power-of-two block scale and added (fmaf) to the warp's running sum, k-blocks in
// ascending order; `splits` warps share a tile, warp split s taking k-blocks s, s + splits,
// ..., and split 0 adds their sums in ascending split order. A column of an mma depends on
// that column of B alone and `splits` on the shape and the device, never on the rows, so a
// row of a T-row call is bit-identical to the row alone (SPECDECODE.md §6.3 R-I3).
// Streaming: resident blocks walk the tile sets, and a lane loads its next U k-block runs
// (of the same tile or of the tile it takes next) before it uses the current ones.
// dsv4-dev-gemv on an H200 (2026-12-01, session 4): the 33.6 MB matrices at 1 / 8 rows in
// 12.9-13.4 / 25.3-25.5 us (the CUDA-core persistent kernel 15.4-16.2 / 87-99 us); a
// cp.async ring in shared memory (S = 3..6 stages) was slower (22-25 us at 1 row), and so
// was an integer f16 -> bf16 step (the conversions do not bound it). That ring copied each
// lane's own 16-byte pieces (half a sector per copy, L2 only); gemv_tc_ring.cuh copies whole
// row runs and shares them in the warp.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/gemv_args.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_bf16.cuh"

namespace dsv4::cuda {

constexpr int kTcRows = 16;  // weight rows per tile: the m16 of the mma
constexpr int kTcCols = 8;   // x rows per tile: the n8
constexpr int kTcK = 128;    // k per warp step: 4 lanes x a 32-element run (one FP8 128-block)
// Runs ahead per lane U x resident blocks per SM B (dsv4-dev-gemv): U1 B2 where the tile
// warps fill the machine, U2 B1 (twice the bytes in flight per warp, 162 registers) where
// fewer than half of its warps have a tile (the shared expert's w1 / w3: 128 tiles).
constexpr int kTcBlocks = 2;
// FP8 weights from 8 MiB take this kernel; below it the CUDA-core chunk kernel is faster at
// one row (dsv4-dev-gemv: wq_a 5.4 against 6.3 us, wkv 4.8 against 6.1), the tensor cores
// at two rows and more.
constexpr int64_t kTcMinBytes = int64_t{8} << 20;

// A lane's 32-element FP8 run of a weight row, W(r, k0 .. k0 + 32) (CHECKPOINT.md §3.4).
struct TcFp8Run {
  static constexpr int kLoads = 2;  // 16-byte loads per run
  Fp8W w;
  __device__ const uint8_t* run(int64_t r, int64_t k0) const { return w.codes + r * w.cols + k0; }
  __device__ void load(int64_t r, int64_t k0, uint4 (&q)[kLoads]) const {
    q[0] = load_chunk(run(r, k0));
    q[1] = load_chunk(run(r, k0) + 16);
  }
  // The 128x128 block scale of row r, k-block kb (a power of two, e8m0).
  __device__ float scale(int64_t r, int64_t kb) const {
    return e8m0_to_f32(__ldg(w.scales + (r >> 7) * w.scale_cols + kb));
  }
  // Elements 4s .. 4s + 3 of the run as bf16x2 {4s, 4s+1}, {4s+2, 4s+3}, unscaled: e4m3 ->
  // f16 (the hardware e4m3x2 conversion, exact) -> f32 -> bf16 (exact: 4 significant bits,
  // exponents -9..8).
  __device__ void pairs(const uint4 (&q)[kLoads], int s, uint32_t (&p)[2]) const {
    const uint32_t words[8] = {q[0].x, q[0].y, q[0].z, q[0].w, q[1].x, q[1].y, q[1].z, q[1].w};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const auto codes = static_cast<__nv_fp8x2_storage_t>(words[s] >> (16 * i));
      const float2 v = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3)));
      uint32_t b[1];
      bf16x2_planes<1>(v.x, v.y, b);
      p[i] = b[0];
    }
  }
};

// A lane's place in a launch: its warp's tile set (tile sb + set of each set group sb =
// blockIdx.x * sets, += step) and k-blocks (split, split + splits, ...), its row block
// r0 .. r0 + nr and x column.
struct TcLane {
  int lane, warp, g, t, splits, sets, set, split, r0, nr;
  int64_t tiles, step, kblocks, gz, wrow;
  const float* x;  // x row r0 + g at the lane's run offset; null past the call's rows
  __device__ explicit TcLane(const GemvArgs& a) {
    lane = threadIdx.x % kWarp;
    warp = threadIdx.x / kWarp;
    g = lane / 4;
    t = lane % 4;
    splits = a.splits;
    sets = kGemvWarps / splits;
    set = warp / splits;
    split = warp % splits;
    tiles = (a.n_out + kTcRows - 1) / kTcRows;
    step = int64_t{gridDim.x} * sets;
    kblocks = a.k_in / kTcK;
    gz = blockIdx.z;
    wrow = a.w_row0 + gz * a.w_group;
    r0 = blockIdx.y * kTcCols;
    nr = a.rows - r0 < kTcCols ? a.rows - r0 : kTcCols;
    x = g < nr ? a.x + (r0 + g) * a.x_stride + gz * a.x_group + 32 * t : nullptr;
  }
  __device__ int64_t first_set() const { return int64_t{blockIdx.x} * sets; }
};

// acc += the k-block kb of the lane's tile rows n0 + g (w0, acc[0..1]) and n0 + g + 8 (w1,
// acc[2..3]): the 8 mma steps in order from zero, then times each row's block scale. x_at(s)
// is the lane's x elements 4s .. 4s + 3 of its run (zero past the call's rows), from global
// memory (tc_block) or a shared-memory copy (gemv_tc_ring.cuh): the same values either way.
template <class C, int P, class XAt>
__device__ inline void tc_block_x(const C& w, const GemvArgs& a, const TcLane& L, int64_t n0, int64_t kb,
                                  const uint4 (&w0)[C::kLoads], const uint4 (&w1)[C::kLoads], XAt x_at,
                                  float (&acc)[4]) {
  const int64_t n_lo = n0 + L.g, n_hi = n_lo + 8;
  const float s_lo = n_lo < a.n_out ? w.scale(L.wrow + n_lo, kb) : 0.0f;
  const float s_hi = n_hi < a.n_out ? w.scale(L.wrow + n_hi, kb) : 0.0f;
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int s = 0; s < kTcK / 16; ++s) {
    const float4 v = x_at(s);
    uint32_t b0[P], b1[P];
    bf16x2_planes<P>(v.x, v.y, b0);
    bf16x2_planes<P>(v.z, v.w, b1);
    uint32_t p0[2], p1[2];
    w.pairs(w0, s, p0);
    w.pairs(w1, s, p1);
    const uint32_t frag[4] = {p0[0], p1[0], p0[1], p1[1]};
#pragma unroll
    for (int p = 0; p < P; ++p) mma_m16n8k16_bf16(d, frag, b0[p], b1[p]);
  }
  acc[0] = fmaf(d[0], s_lo, acc[0]);
  acc[1] = fmaf(d[1], s_lo, acc[1]);
  acc[2] = fmaf(d[2], s_hi, acc[2]);
  acc[3] = fmaf(d[3], s_hi, acc[3]);
}

// tc_block_x with x read from global memory (x row r0 + g, L.x).
template <class C, int P>
__device__ inline void tc_block(const C& w, const GemvArgs& a, const TcLane& L, int64_t n0, int64_t kb,
                                const uint4 (&w0)[C::kLoads], const uint4 (&w1)[C::kLoads], float (&acc)[4]) {
  const float* x = L.x ? L.x + kb * kTcK : nullptr;
  tc_block_x<C, P>(w, a, L, n0, kb, w0, w1, [x](int s) {
    return x ? *reinterpret_cast<const float4*>(x + 4 * s) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }, acc);
}

// The end of a tile: split 0 adds the splits' sums in ascending order and stores y. acc[i]
// of lane (g, t) is weight row n0 + g + 8 (i / 2), column 2t + i % 2. Every warp of the
// block calls it (it holds the barriers).
__device__ inline void tc_store(const float (&acc)[4], float (&part)[kGemvWarps][4][kWarp], const TcLane& L,
                                int64_t n0, const GemvArgs& a) {
#pragma unroll
  for (int i = 0; i < 4; ++i) part[L.warp][i][L.lane] = acc[i];
  __syncthreads();
  if (L.split == 0)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = 2 * L.t + i % 2;
      const int64_t n = n0 + L.g + 8 * (i / 2);
      if (col < L.nr && n < a.n_out) {
        float v = part[L.warp][i][L.lane];
        for (int j = 1; j < L.splits; ++j) v += part[L.warp + j][i][L.lane];
        a.y[(L.r0 + col) * a.y_stride + L.gz * a.y_group + n] = v;
      }
    }
  __syncthreads();  // part is read before the next tile writes it
}

// Grid (resident blocks, row blocks of 8, groups); a.splits warps per tile. The runs in
// registers, U k-blocks ahead.
template <class C, int P, int U, int MinBlocks>
__global__ void __launch_bounds__(kGemvThreads, MinBlocks) gemv_tc_kernel(C w, GemvArgs a) {
  __shared__ float part[kGemvWarps][4][kWarp];
  const TcLane L(a);
  uint4 next[U][2][C::kLoads] = {};  // rows past n_out keep finite codes (their D rows are dropped)
  auto load = [&](int64_t tile, int64_t kb) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t n = tile * kTcRows + L.g + 8 * h;
        if (n < a.n_out && kb + u * L.splits < L.kblocks)
          w.load(L.wrow + n, (kb + u * L.splits) * kTcK + 32 * L.t, next[u][h]);
      }
  };
  load(L.first_set() + L.set, L.split);  // weights only: in flight before the wait (launch.cuh)
  pdl_wait();
  pdl_launch_dependents();
  for (int64_t sb = L.first_set(); sb < L.tiles; sb += L.step) {  // block-uniform
    const int64_t tile = sb + L.set, n0 = tile * kTcRows;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t kb = L.split; kb < L.kblocks; kb += int64_t{L.splits} * U) {
      uint4 cur[U][2][C::kLoads];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int i = 0; i < C::kLoads; ++i) cur[u][h][i] = next[u][h][i];
      if (kb + int64_t{L.splits} * U < L.kblocks) load(tile, kb + int64_t{L.splits} * U);
      else load(tile + L.step, L.split);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (kb + u * L.splits >= L.kblocks) break;
        tc_block<C, P>(w, a, L, n0, kb + u * L.splits, cur[u][0], cur[u][1], acc);
      }
    }
    tc_store(acc, part, L, n0, a);
  }
}

// Warps per tile, `tiles` tiles (all groups) of `kblocks` k-blocks: the most (a power of
// two <= kGemvWarps, each warp keeping >= 2 k-blocks) whose tile warps fit in one wave of
// the machine (sm_count SMs x kTcBlocks blocks x kGemvWarps warps): dsv4-dev-gemv's best
// at every Flash shape (wq_b 1, wo_a 4, wo_b / shared 8, the indexer's wq_b 4). Shape and
// device only (R-I3).
inline int gemv_tc_splits(int64_t tiles, int64_t kblocks, int sm_count) {
  const int64_t fill_warps = int64_t{sm_count} * kTcBlocks * kGemvWarps;
  int s = 1;
  while (s < kGemvWarps && tiles * (2 * s) <= fill_warps && kblocks >= int64_t{2} * (2 * s)) s *= 2;
  return s;
}

// The tensor-core path takes an FP8 weight whose rows are whole 16-byte chunks and a problem
// of whole k-blocks with 16-byte aligned x rows.
inline bool tc_layout(const Fp8W& w, const GemvArgs& a) {
  return aligned16(w.codes) && w.cols % 16 == 0 && a.k_in % kTcK == 0 && aligned16(a.x) && a.x_stride % 4 == 0 &&
         a.x_group % 4 == 0;
}

// gemv_tc_kernel<C, P, U, MinBlocks> with a.splits set: as many blocks as are resident at
// once on a device of `sm_count` multiprocessors, at most one per tile set; grid.y the row
// blocks of 8, grid.z the groups.
template <class C, int P, int U, int MinBlocks>
void launch_gemv_tc(const C& c, const GemvArgs& a, int groups, int sm_count, cudaStream_t stream) {
  static const int per_sm = [] {
    int n = 0;
    DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemv_tc_kernel<C, P, U, MinBlocks>,
                                                                  kGemvThreads, 0));
    return n;
  }();
  const dim3 grid = resident_gemv_grid(a, (a.n_out + kTcRows - 1) / kTcRows, kTcCols, groups, sm_count, per_sm);
  cuda::launch(gemv_tc_kernel<C, P, U, MinBlocks>, grid, kGemvThreads, 0, stream, c, a);
}

// The shipped launch: splits by gemv_tc_splits, U / B by how full the tile warps leave the
// machine (kTcBlocks above). Shape and device only, so every row count computes alike.
template <class C, int P>
void launch_gemv_tc_auto(const C& c, GemvArgs a, int groups, int sm_count, cudaStream_t stream) {
  const int64_t tiles = (a.n_out + kTcRows - 1) / kTcRows * groups;
  a.splits = gemv_tc_splits(tiles, a.k_in / kTcK, sm_count);
  if (tiles * a.splits * 2 <= int64_t{sm_count} * kTcBlocks * kGemvWarps)
    launch_gemv_tc<C, P, 2, 1>(c, a, groups, sm_count, stream);
  else
    launch_gemv_tc<C, P, 1, kTcBlocks>(c, a, groups, sm_count, stream);
}

}  // namespace dsv4::cuda
