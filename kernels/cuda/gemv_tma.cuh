// The tensor-core FP8 GEMV of gemv_tc.cuh with its weight bytes streamed into shared memory
// by bulk asynchronous copies (issue 12: gemv_tc streams 2.5-2.6 TB/s on the 33.6 MB
// matrices and is latency-bound on the 8 MiB ones; each lane issues its own 16-byte loads,
// so the bytes in flight are bounded by registers and occupancy). Not yet the engine's:
// dsv4-dev-gemv (bench/dev/gemv_variants.cu) times it against gemv_tc.
//
// Arithmetic: gemv_tc's, by construction. The same tiles, the same split partition
// (gemv_tc_splits: warp split s of a tile takes k-blocks s, s + splits, ... ascending), the
// same tc_block (decode, mma chain, block scale) on the same 32-byte runs, the same tc_store
// (the splits' sums in ascending order): only where a run comes from changes (shared memory
// instead of a register load), so y is gemv_tc's bit for bit at every shape and row count
// and R-I3 (SPECDECODE.md §6.3) holds as it does there.
//
// Streaming: a block is gemv_tc's 8 computing warps plus one producer warp. The block walks
// gemv_tc's set groups (TcLane); a set group's k-blocks go in rounds, round j being k-blocks
// j*splits .. j*splits + splits - 1 of each of its tiles (one k-block per warp), and a stage
// is D consecutive rounds of one set group: for each of its tiles, 16 rows of D x splits
// k-blocks, one contiguous run of a weight row each (rows are `cols` bytes, row-major). The
// producer fills a ring of R stages, one bulk copy per row (lanes issue them in parallel),
// counted on the stage's `full` mbarrier (bulk_copy.cuh); the computing warps wait on it,
// read their runs, and arrive on the stage's `empty` barrier before computing, which the
// producer waits on before it refills the stage R stages later. Up to R stages of the block
// are in flight (R x D x 16 KiB), far beyond the registers' share of gemv_tc (Little's law:
// ~4 TB/s over 132 SMs x ~1 us of DRAM latency = ~30 KiB in flight per SM).
// Why one bulk copy per row and not a 2D tensor map (cuTensorMapEncodeTiled): the rows of a
// stage land 16 bytes apart beyond their length (kTmaPad), so the 8 rows a warp's lanes read
// at once fall in different banks (a tensor map lands a box densely and would need a
// swizzle), and the kernel takes gemv_tc's arguments unchanged (no per-weight descriptor to
// encode at load), so adopting it is a change of launch site.
// PDL (launch.cuh): the producer reads nothing but the weights (through the copy engine)
// and writes nothing global, so it never waits: its first R stages are in flight before the
// previous kernel has ended. The computing warps call pdl_wait() before they read x (in
// tc_block) or write y.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/gemv_tc.cuh"
#include "kernels/cuda/launch.cuh"

namespace dsv4::cuda {

constexpr int kTmaThreads = kGemvThreads + kWarp;  // the computing warps, then the producer
// Bytes after each row of a stage: a row is a multiple of 128 bytes long, so without it the
// rows g = 0..7 of a warp's 16-byte reads would fall in the same four banks.
constexpr int kTmaPad = 16;
// One stage of D rounds: 16 x sets tile rows of D x splits k-blocks (128 / splits rows of
// D x splits x 128 + kTmaPad bytes), at most this (splits 1).
__host__ __device__ constexpr int tma_stage_bytes(int D) { return kGemvWarps * kTcRows * (D * kTcK + kTmaPad); }
// Whether MinBlocks blocks of R stages of D rounds fit on an sm_90 multiprocessor (228 KiB of
// shared memory, 1 KiB of it reserved a block, at most 227 KiB a block).
constexpr bool tma_fits(int R, int D, int MinBlocks) {
  const int block = R * tma_stage_bytes(D) + kGemvWarps * 4 * kWarp * 4 + 2 * R * 8;
  return block <= 227 * 1024 && MinBlocks * (block + 1024) <= 228 * 1024;
}

// The ring's default: dsv4-dev-gemv's sweep decides (bench/README.md).
constexpr int kTmaStages = 4, kTmaRounds = 1, kTmaBlocks = 2;

// The barrier of the computing warps (named barrier 1: the producer has left).
struct TmaComputeSync {
  __device__ void operator()() const { asm volatile("bar.sync 1, %0;\n" ::"n"(kGemvThreads) : "memory"); }
};

// Calls f(stage index i, set group sb, first round j0, rounds nj, last stage of the group)
// for the block's stages in order: its set groups (TcLane), each cut into stages of up to
// D of its ceil(kblocks / splits) rounds. Block-uniform.
template <int D, class F>
__device__ inline void tma_stages(const TcLane& L, F&& f) {
  const int64_t rounds = (L.kblocks + L.splits - 1) / L.splits;
  int64_t i = 0;
  for (int64_t sb = L.first_set(); sb < L.tiles; sb += L.step)
    for (int64_t j0 = 0; j0 < rounds; j0 += D) {
      const int nj = static_cast<int>(min(int64_t{D}, rounds - j0));
      f(i++, sb, j0, nj, j0 + nj == rounds);
    }
}

// The bytes of one stage row: D x splits k-blocks and the pad.
__device__ inline int tma_row_stride(const TcLane& L, int D) { return D * L.splits * kTcK + kTmaPad; }

// The producer warp: fills stage i of the ring once the computing warps have released its
// slot's previous stage (i - R), then the copies of its rows (tile sb + set's row r at
// stage row 16 set + r; a row past n_out copies row n_out - 1: finite codes whose D rows
// tc_store drops; tiles past the last are not copied and not read).
template <class C, int R, int D>
__device__ inline void tma_produce(const C& w, const GemvArgs& a, const TcLane& L, uint8_t* ring, uint64_t* full,
                                   uint64_t* empty) {
  const int stride = tma_row_stride(L, D);
  tma_stages<D>(L, [&](int64_t i, int64_t sb, int64_t j0, int nj, bool) {
    const int slot = static_cast<int>(i % R);
    if (i >= R) mbarrier_wait_parity(&empty[slot], static_cast<uint32_t>((i / R - 1) & 1));
    const int64_t kb0 = j0 * L.splits;
    const auto row_bytes = static_cast<uint32_t>((min(L.kblocks, kb0 + int64_t{nj} * L.splits) - kb0) * kTcK);
    const int copies = static_cast<int>(min(int64_t{L.sets}, L.tiles - sb)) * kTcRows;
    if (L.lane == 0) mbarrier_arrive_expect_tx(&full[slot], copies * row_bytes);
    __syncwarp();
    uint8_t* stage = ring + static_cast<size_t>(slot) * tma_stage_bytes(D);
    for (int c = L.lane; c < copies; c += kWarp) {
      const int64_t n = min(sb * kTcRows + c, a.n_out - 1);
      bulk_copy_to_shared(stage + c * stride, w.run(L.wrow + n, kb0 * kTcK), row_bytes, &full[slot]);
    }
  });
}

// A computing warp: per stage, wait for it, read the lane's runs of each round (rows g and
// g + 8 of its tile, its k-block j * splits + split, bytes 32 t ..), release the stage, and
// run gemv_tc's tc_block on them; tc_store at the end of each set group.
template <class C, int P, int R, int D>
__device__ inline void tma_compute(const C& w, const GemvArgs& a, const TcLane& L, const uint8_t* ring,
                                   uint64_t* full, uint64_t* empty, float (&part)[kGemvWarps][4][kWarp]) {
  const int stride = tma_row_stride(L, D);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  tma_stages<D>(L, [&](int64_t i, int64_t sb, int64_t j0, int nj, bool last) {
    const int slot = static_cast<int>(i % R);
    const int64_t tile = sb + L.set;
    mbarrier_wait_parity(&full[slot], static_cast<uint32_t>((i / R) & 1));
    const uint8_t* row = ring + static_cast<size_t>(slot) * tma_stage_bytes(D) +
                         (L.set * kTcRows + L.g) * stride + L.split * kTcK + 32 * L.t;
    for (int jj = 0; jj < nj; ++jj) {
      const int64_t kb = (j0 + jj) * L.splits + L.split;
      const bool live = tile < L.tiles && kb < L.kblocks;  // warp-uniform
      uint4 w0[C::kLoads] = {}, w1[C::kLoads] = {};
      if (live) {
        const uint8_t* run = row + jj * L.splits * kTcK;
#pragma unroll
        for (int q = 0; q < C::kLoads; ++q) {
          w0[q] = *reinterpret_cast<const uint4*>(run + 16 * q);
          w1[q] = *reinterpret_cast<const uint4*>(run + 8 * stride + 16 * q);
        }
      }
      if (jj == nj - 1) {  // the stage is read: the producer may refill it
        __syncwarp();
        if (L.lane == 0) mbarrier_arrive(&empty[slot]);
      }
      if (live) tc_block<C, P>(w, a, L, tile * kTcRows, kb, w0, w1, acc);
    }
    if (last) {
      tc_store(acc, part, L, tile * kTcRows, a, TmaComputeSync{});
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[q] = 0.0f;
    }
  });
}

// Grid (resident blocks, row blocks of 8, groups) as gemv_tc; a.splits warps per tile (the
// shipped gemv_tc_splits for gemv_tc's bits); dynamic shared memory R x tma_stage_bytes(D).
template <class C, int P, int R, int D, int MinBlocks>
__global__ void __launch_bounds__(kTmaThreads, MinBlocks) gemv_tma_kernel(C w, GemvArgs a) {
  static_assert(C::kLoads * 16 == 32, "a lane's run is 32 bytes (tc_block)");
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ float part[kGemvWarps][4][kWarp];
  __shared__ uint64_t full[R], empty[R];
  if (threadIdx.x == 0) {
    for (int r = 0; r < R; ++r) {
      mbarrier_init(&full[r], 1);              // the producer's arrive.expect_tx
      mbarrier_init(&empty[r], kGemvWarps);    // one arrival per computing warp
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  const TcLane L(a);  // the producer uses its walk and weight rows only (its warp has no tile)
  if (L.warp == kGemvWarps) {
    tma_produce<C, R, D>(w, a, L, ring, full, empty);
    return;
  }
  pdl_wait();
  pdl_launch_dependents();
  tma_compute<C, P, R, D>(w, a, L, ring, full, empty, part);
}

// gemv_tma_kernel<C, P, R, D, MinBlocks> with a.splits set: as many blocks as are resident
// at once (at most one per tile set), grid.y the row blocks of 8, grid.z the groups.
template <class C, int P, int R, int D, int MinBlocks>
void launch_gemv_tma(const C& c, const GemvArgs& a, int groups, int sm_count, cudaStream_t stream) {
  static_assert(tma_fits(R, D, MinBlocks), "the ring does not fit MinBlocks blocks on a multiprocessor");
  constexpr size_t smem = static_cast<size_t>(R) * tma_stage_bytes(D);
  static const int per_sm = [] {
    const auto kernel = gemv_tma_kernel<C, P, R, D, MinBlocks>;
    DSV4_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int n = 0;
    DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kTmaThreads, smem));
    return n;
  }();
  const dim3 grid = resident_gemv_grid(a, (a.n_out + kTcRows - 1) / kTcRows, kTcCols, groups, sm_count, per_sm);
  cuda::launch(gemv_tma_kernel<C, P, R, D, MinBlocks>, grid, kTmaThreads, smem, stream, c, a);
}

// launch_gemv_tc_auto's problem on this kernel: gemv_tc_splits (so its bits), the ring at
// its default (kTmaStages x kTmaRounds, kTmaBlocks per SM).
template <class C, int P>
void launch_gemv_tma_auto(const C& c, GemvArgs a, int groups, int sm_count, cudaStream_t stream) {
  a.splits = gemv_tc_splits((a.n_out + kTcRows - 1) / kTcRows * groups, a.k_in / kTcK, sm_count);
  launch_gemv_tma<C, P, kTmaStages, kTmaRounds, kTmaBlocks>(c, a, groups, sm_count, stream);
}

}  // namespace dsv4::cuda
