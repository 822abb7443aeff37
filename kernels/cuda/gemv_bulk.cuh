// The tensor-core FP8 GEMV fed by bulk copies (issue 12: the dense linears stream their
// weights at the bandwidth, also across kernel boundaries). gemv_tc's arithmetic
// (tc_block_x: 16 weight rows x up to 8 rows per mma tile, a k-block's 8 mma steps from
// zero, then fmaf of the block scale into the warp's sum) with another K partition and
// another way for the bytes to arrive:
//
// Stage = 16 weight rows x kBulkStageK k (1 KiB of each row: 8 k-blocks), one
// cp.async.bulk per row into a shared row of kBulkPitch bytes (the 16-byte skew puts lane
// groups g and g + 1 on other banks). A copy warp (the block's last) walks the block's
// tiles and their stages ahead of the 8 compute warps through a kBulkStages-deep mbarrier
// ring ("full": the copy warp's expect_tx and the rows' bytes; "empty": each compute warp's
// release). It never waits for the previous kernel: the weights are never written by one,
// so under PDL a block that is resident early streams its first stages while the previous
// kernel ends, which a GEMV holding its bytes in registers (gemv_tc: all of the register
// file at 2 blocks a multiprocessor) cannot, because its blocks cannot be resident then.
// This block takes 288 threads and about 75 KB of shared memory: room for the next kernel.
//
// K order: compute warp w takes k-block w of every stage, i.e. k-blocks w, w + 8, w + 16,
// ... of its tile ascending (gemv_tc's order at splits = 8), and warp 0 adds the 8 warps'
// sums in ascending warp order. The order is a function of k_in alone and each mma column
// depends on its x row alone, so a row of a T-row call is bit-identical to the row alone
// (SPECDECODE.md §6.3 R-I3). Tiles: all groups' 16-row tiles in one list (group g's tile j
// is entry g * tiles_per_group + j), resident blocks (one a multiprocessor) taking entries
// blockIdx.x, + gridDim.x, ...; grid.y the row blocks of 8.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/gemv_tc.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mbarrier_ring.cuh"

namespace dsv4::cuda {

constexpr int kBulkWarps = 8;                            // compute warps: warp w, k-block w of a stage
constexpr int kBulkThreads = (kBulkWarps + 1) * kWarp;   // + the copy warp
constexpr int kBulkStageK = kBulkWarps * kTcK;           // k of a stage: 1 KiB of an FP8 row
constexpr int kBulkPitch = kBulkStageK + 16;             // a stage row in shared memory
constexpr int kBulkStageBytes = kTcRows * kBulkPitch;
constexpr int kBulkStages = 4;                           // 64 KiB of weights in flight a block
constexpr int kBulkPartFloats = 2 * kBulkWarps * 4 * kWarp;  // the warps' sums, two tiles' worth
constexpr size_t kBulkSmem =
    size_t{kBulkStages} * kBulkStageBytes + kBulkPartFloats * sizeof(float) + 2 * kBulkStages * sizeof(uint64_t);

// Named barriers of the compute warps (0 is __syncthreads'): kBulkSumsIn + p, the 7 other
// warps' sums of a tile of parity p are written; kBulkSumsRead + p, warp 0 has read them.
constexpr int kBulkSumsIn = 1, kBulkSumsRead = 3;
constexpr int kBulkComputeThreads = kBulkWarps * kWarp;
// Barrier ids as immediates (a register id makes ptxas reserve all 16 barriers).
template <int Id>
__device__ inline void bar_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(Id), "n"(kBulkComputeThreads) : "memory");
}
template <int Id>
__device__ inline void bar_arrive() {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(Id), "n"(kBulkComputeThreads) : "memory");
}
template <int Id>
__device__ inline void bar_sync(int p) {
  p ? bar_sync<Id + 1>() : bar_sync<Id>();
}
template <int Id>
__device__ inline void bar_arrive(int p) {
  p ? bar_arrive<Id + 1>() : bar_arrive<Id>();
}

// What tc_block_x needs of a lane: its lane group and its tile's first weight row.
struct BulkLane {
  int g;
  int64_t wrow;
};

template <int P>
__global__ void __launch_bounds__(kBulkThreads, 1) gemv_bulk_kernel(TcFp8Run w, GemvArgs a, int groups) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t bulk_smem[];
  uint8_t* ring = bulk_smem;
  float* part = reinterpret_cast<float*>(bulk_smem + kBulkStages * kBulkStageBytes);  // [2][warp][4][lane]
  uint64_t* full = reinterpret_cast<uint64_t*>(part + kBulkPartFloats);
  uint64_t* empty = full + kBulkStages;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t per_group = (a.n_out + kTcRows - 1) / kTcRows, tiles = per_group * groups;
  const int64_t kblocks = a.k_in / kTcK;
  const int stages = static_cast<int>((kblocks + kBulkWarps - 1) / kBulkWarps);  // a tile's
  if (threadIdx.x == 0) {
    for (int b = 0; b < kBulkStages; ++b) {
      mbarrier::init(full + b, 1);
      mbarrier::init(empty + b, kBulkWarps);
    }
    mbarrier::init_fence();
  }
  __syncthreads();

  if (warp == kBulkWarps) {  // the copy warp: lane r copies row r of a stage
    pdl_launch_dependents();
    int64_t f = 0;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int64_t n0 = tile % per_group * kTcRows;
      const int rows = static_cast<int>(min(int64_t{kTcRows}, a.n_out - n0));
      const uint8_t* src = w.run(a.w_row0 + tile / per_group * a.w_group + n0 + lane, 0);
      for (int s = 0; s < stages; ++s, ++f) {
        const int b = static_cast<int>(f % kBulkStages);
        if (f >= kBulkStages) mbarrier::wait(empty + b, static_cast<int>((f / kBulkStages - 1) & 1));
        const auto bytes = static_cast<uint32_t>(min(int64_t{kBulkWarps}, kblocks - s * kBulkWarps) * kTcK);
        if (lane == 0) mbarrier::arrive_expect_tx(full + b, rows * bytes);
        __syncwarp();
        if (lane < rows)
          mbarrier::bulk_copy(ring + b * kBulkStageBytes + lane * kBulkPitch, src + s * kBulkStageK, bytes, full + b);
      }
    }
    return;  // the block lives on in its compute warps, which wait for every copy
  }

  pdl_wait();  // x is the previous kernel's
  pdl_launch_dependents();
  const int g = lane / 4, t = lane % 4;
  const int r0 = blockIdx.y * kTcCols, nr = a.rows - r0 < kTcCols ? a.rows - r0 : kTcCols;
  int64_t f = 0;
  int i = 0;  // the block's tiles so far
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, ++i) {
    const int64_t grp = tile / per_group, n0 = tile % per_group * kTcRows;
    const BulkLane L{g, a.w_row0 + grp * a.w_group};
    const float* x = g < nr ? a.x + (r0 + g) * a.x_stride + grp * a.x_group + 32 * t : nullptr;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s = 0; s < stages; ++s, ++f) {
      const int b = static_cast<int>(f % kBulkStages);
      mbarrier::wait(full + b, static_cast<int>((f / kBulkStages) & 1));
      const int64_t kb = int64_t{s} * kBulkWarps + warp;
      if (kb < kblocks) {
        const uint8_t* run = ring + b * kBulkStageBytes + g * kBulkPitch + warp * kTcK + 32 * t;
        const uint4 w0[2] = {reinterpret_cast<const uint4*>(run)[0], reinterpret_cast<const uint4*>(run)[1]};
        const uint8_t* run8 = run + 8 * kBulkPitch;
        const uint4 w1[2] = {reinterpret_cast<const uint4*>(run8)[0], reinterpret_cast<const uint4*>(run8)[1]};
        const float* xk = x ? x + kb * kTcK : nullptr;
        tc_block_x<TcFp8Run, P>(w, a, L, n0, kb, w0, w1, [xk](int q) {
          return xk ? *reinterpret_cast<const float4*>(xk + 4 * q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }, acc);
      }
      __syncwarp();
      if (lane == 0) mbarrier::arrive(empty + b);  // this warp's reads of the stage are done
    }
    // The tile's sums: warps 1-7 hand theirs to warp 0 through part[i % 2]; warp 0 adds them
    // in warp order and stores y (tc_store's layout: acc[q] is row n0 + g + 8 (q / 2),
    // column 2t + q % 2). Warps 1-7 go on to the next tile at once; before they write part
    // of this parity again (tile i + 2) they wait for warp 0 to have read it.
    const int p = i & 1;
    float* sums = part + p * (kBulkWarps * 4 * kWarp);
    if (warp > 0) {
      if (i >= 2) bar_sync<kBulkSumsRead>(p);
#pragma unroll
      for (int q = 0; q < 4; ++q) sums[(warp * 4 + q) * kWarp + lane] = acc[q];
      bar_arrive<kBulkSumsIn>(p);
    } else {
      bar_sync<kBulkSumsIn>(p);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int col = 2 * t + q % 2;
        const int64_t n = n0 + g + 8 * (q / 2);
        if (col < nr && n < a.n_out) {
          float v = acc[q];
          for (int j = 1; j < kBulkWarps; ++j) v += sums[(j * 4 + q) * kWarp + lane];
          a.y[(r0 + col) * a.y_stride + grp * a.y_group + n] = v;
        }
      }
      if (tile + 2 * int64_t{gridDim.x} < tiles) bar_arrive<kBulkSumsRead>(p);  // tile i + 2 exists
    }
  }
#else
  __trap();  // launch_gemv_bulk runs it on compute capability 9.0 devices only
#endif
}

// Whether the bulk GEMV takes this problem: gemv_tc's layout, on a 9.0 device.
inline bool bulk_gemv_takes(const Fp8W& w, const GemvArgs& a, int compute_major) {
  return compute_major >= 9 && tc_layout(w, a);
}

// gemv_bulk_kernel over a's tiles: one block a multiprocessor (shared between the row
// blocks), never more than the tiles.
template <int P>
void launch_gemv_bulk(const TcFp8Run& c, const GemvArgs& a, int groups, int sm_count, cudaStream_t stream) {
  static const bool sized = [] {
    DSV4_CUDA_CHECK(cudaFuncSetAttribute(gemv_bulk_kernel<P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kBulkSmem)));
    return true;
  }();
  (void)sized;
  const int64_t tiles = (a.n_out + kTcRows - 1) / kTcRows * groups;
  const unsigned gy = static_cast<unsigned>((a.rows + kTcCols - 1) / kTcCols);
  const int64_t blocks = std::min<int64_t>(tiles, std::max<int64_t>(1, sm_count / static_cast<int64_t>(gy)));
  cuda::launch(gemv_bulk_kernel<P>, dim3(static_cast<unsigned>(blocks), gy), kBulkThreads, kBulkSmem, stream, c, a,
               groups);
}

}  // namespace dsv4::cuda
