// gemv_tc's arithmetic (gemv_tc.cuh: the same tiles, warp walk, splits, K order and
// combine, so the same bits) fed from a per-warp shared-memory ring filled by cp.async
// (issue 12: gemv_tc holds its one k-block ahead in registers, 126 of them, ~2 KB in flight
// per warp, 1.8-2.5 TB/s). Each stage is one item of the warp's walk, its (tile, k-block):
// the 16 weight rows x 128 codes (2 KB), and with StageX the x rows of the row block at the
// k-block (nr x 128 f32), so S - 1 items are in flight per warp without holding registers.
//
// The copies are coalesced: copy i (0..3) of lane l takes 16-byte piece 8 (4i + l / 8) +
// l % 8 of the stage, four whole 128-byte row runs per instruction (gemv_tc's own pattern,
// lane (g, t) reading 32 bytes at 32 t of rows g and g + 8, touches each sector with two
// instructions; an earlier cp.async variant of that pattern ran 22-25 us against 13-14). A
// lane then reads back the pieces gemv_tc's lane holds, so one __syncwarp per item orders
// the copies (cp.async.wait_group is per thread) against the other lanes' reads, and the
// reads of the previous item against the copy that refills its stage. XOR swizzles keep
// the 16-byte reads conflict-free (8 lanes of a phase on distinct bank groups): weight
// piece c of row r at c ^ (r & 1); x piece 8t + s of row j at 8t + (s ^ (t + 4 (j & 1))).
//
// PDL (launch.cuh): the weight copies of the first S - 1 items are issued before the wait;
// the x copies only after it, each committed with its item's group (the weights issued
// before the wait join the first group).
#pragma once
#include <array>

#include "kernels/cuda/gemv_tc.cuh"

namespace dsv4::cuda {

constexpr int kRingWPieces = kTcRows * kTcK / 16;  // 16-byte weight pieces per stage (128)
constexpr int kRingXPieces = kTcK * 4 / 16;        // 16-byte pieces of one x row at a k-block (32)

// cp.async (PTX ISA "cp.async") of 16 bytes, zero-filled when !valid: .cg (L2 only) for
// the weights, streamed once; .ca (L1 too) for x, which the block's other warps and blocks
// on the SM read at the same k-blocks. Then the group commit and the wait for all but the
// newest N groups (the memory clobbers keep shared-memory reads below the wait).
template <bool L1>
__device__ inline void ring_copy16(void* dst, const void* src, bool valid) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if constexpr (L1)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ inline void ring_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ inline void ring_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The 16-byte pieces of one stage: the weight tile, then `xrows` x rows.
__host__ __device__ inline int ring_stage_pieces(int xrows) { return kRingWPieces + xrows * kRingXPieces; }
// Shared memory of a ring launch: kGemvWarps warps x S stages.
inline size_t ring_smem(int stages, int xrows) {
  return size_t{kGemvWarps} * stages * ring_stage_pieces(xrows) * 16;
}

// Physical slots of the swizzled layout (comment above).
__device__ inline int ring_w_slot(int r, int c) { return 8 * r + (c ^ (r & 1)); }
__device__ inline int ring_x_slot(int j, int t, int s) { return 32 * j + 8 * t + (s ^ ((t + 4 * (j & 1)) & 7)); }

// Grid as gemv_tc's (resident blocks walk the tile sets); dynamic shared memory
// ring_smem(S, StageX ? min(rows, 8) : 0).
template <class C, int P, int S, bool StageX, int MinBlocks>
__global__ void __launch_bounds__(kGemvThreads, MinBlocks) gemv_tc_ring_kernel(C w, GemvArgs a) {
  static_assert(C::kLoads == 2 && S >= 2, "a stage row is 128 one-byte codes; at least one item in flight");
  extern __shared__ uint4 ring[];
  __shared__ float part[kGemvWarps][4][kWarp];
  const TcLane L(a);
  const int xrows = StageX ? (a.rows < kTcCols ? a.rows : kTcCols) : 0;  // the stage layout, every block
  const int pieces = ring_stage_pieces(xrows);
  uint4* const mine = ring + L.warp * S * pieces;
  const int cr = L.lane / 8, cc = L.lane % 8;  // the lane's copy row (+ 4i) and piece
  // The copy walk: the warp's items in the order they are used, S - 1 ahead of the reads.
  int64_t ptile = L.first_set() + L.set, pkb = L.split;
  auto copy_w = [&](int st) {
    uint4* dst = mine + st * pieces;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = 4 * i + cr;
      const int64_t n = ptile * kTcRows + r;
      const bool valid = n < a.n_out;  // zeros past n_out and past the walk's last tile
      const uint8_t* src = valid ? w.run(L.wrow + n, pkb * kTcK + 16 * cc) : w.w.codes;
      ring_copy16<false>(dst + ring_w_slot(r, cc), src, valid);
    }
  };
  auto copy_x = [&](int st) {  // after pdl_wait only
    uint4* dst = mine + st * pieces + kRingWPieces;
    const int t = L.lane / 8, s = L.lane % 8;
    for (int j = 0; j < L.nr; ++j) {
      const float* src = a.x + (L.r0 + j) * a.x_stride + L.gz * a.x_group + pkb * kTcK + 4 * L.lane;
      ring_copy16<true>(dst + ring_x_slot(j, t, s), src, true);
    }
  };
  auto advance = [&] {
    pkb += L.splits;
    if (pkb >= L.kblocks) {
      pkb = L.split;
      ptile += L.step;
    }
  };
  // Weights only before the wait (launch.cuh); with StageX they join the first x group.
  {
    const int64_t t0 = ptile, k0 = pkb;
#pragma unroll
    for (int st = 0; st < S - 1; ++st) {
      copy_w(st);
      if (!StageX) ring_commit();
      advance();
    }
    pdl_wait();
    pdl_launch_dependents();
    if (StageX) {
      ptile = t0;
      pkb = k0;
#pragma unroll
      for (int st = 0; st < S - 1; ++st) {
        copy_x(st);
        ring_commit();
        advance();
      }
    }
  }
  int stage = 0;
  for (int64_t sb = L.first_set(); sb < L.tiles; sb += L.step) {  // block-uniform
    const int64_t n0 = (sb + L.set) * kTcRows;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t kb = L.split; kb < L.kblocks; kb += L.splits) {
      ring_wait<S - 2>();  // this lane's copies of the item have landed
      __syncwarp();        // ... and every lane's; the previous item's reads are done
      const uint4* cur = mine + stage * pieces;
      uint4 w0[2], w1[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        w0[i] = cur[ring_w_slot(L.g, 2 * L.t + i)];
        w1[i] = cur[ring_w_slot(L.g + 8, 2 * L.t + i)];
      }
      const int refill = stage == 0 ? S - 1 : stage - 1;  // the stage the previous item read
      copy_w(refill);
      if (StageX) copy_x(refill);
      ring_commit();
      advance();
      if (StageX) {
        const float4* xs = reinterpret_cast<const float4*>(cur + kRingWPieces);
        const bool live = L.g < L.nr;
        tc_block_x<C, P>(w, a, L, n0, kb, w0, w1, [&](int s) {
          return live ? xs[ring_x_slot(L.g, L.t, s)] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }, acc);
      } else {
        tc_block<C, P>(w, a, L, n0, kb, w0, w1, acc);
      }
      stage = stage == S - 1 ? 0 : stage + 1;
    }
    tc_store(acc, part, L, n0, a);
  }
  ring_wait<0>();  // the walk's copies past the last item land before the block exits
}

// gemv_tc_ring_kernel<C, P, S, StageX, MinBlocks> with a.splits set (gemv_tc_splits, so
// the bits are gemv_tc's): gemv_tc's grid at the ring's occupancy.
template <class C, int P, int S, bool StageX, int MinBlocks>
void launch_gemv_tc_ring(const C& c, const GemvArgs& a, int groups, int sm_count, cudaStream_t stream) {
  auto* kernel = gemv_tc_ring_kernel<C, P, S, StageX, MinBlocks>;
  // Resident blocks per SM by staged x rows (the shared memory sets the occupancy).
  static const std::array<int, kTcCols + 1> per_sm = [kernel] {
    DSV4_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(ring_smem(S, StageX ? kTcCols : 0))));
    std::array<int, kTcCols + 1> n{};
    for (int xrows = 0; xrows <= (StageX ? kTcCols : 0); ++xrows)
      DSV4_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n[xrows], kernel, kGemvThreads, ring_smem(S, xrows)));
    return n;
  }();
  const int xrows = StageX ? std::min(a.rows, kTcCols) : 0;
  const dim3 grid = resident_gemv_grid(a, (a.n_out + kTcRows - 1) / kTcRows, kTcCols, groups, sm_count,
                                       std::max(per_sm[xrows], 1));
  cuda::launch(kernel, grid, kGemvThreads, ring_smem(S, xrows), stream, c, a);
}

// The ring by row count, splits by gemv_tc_splits (so every choice gives gemv_tc's bits and
// a row's bits never depend on the rows: R-I3). One row: S 4, x from global memory (its
// loads touch 4 lines each). 2, 3-4 and 5-8 rows: x staged, S 4, 3, 2, the most stages
// whose 2 blocks fit an SM (8 warps x S x (2 + nr / 2) KB = 96 KB a block).
template <class C, int P>
void launch_gemv_tc_ring_auto(const C& c, GemvArgs a, int groups, int sm_count, cudaStream_t stream) {
  a.splits = gemv_tc_splits((a.n_out + kTcRows - 1) / kTcRows * groups, a.k_in / kTcK, sm_count);
  if (a.rows == 1) launch_gemv_tc_ring<C, P, 4, false, 2>(c, a, groups, sm_count, stream);
  else if (a.rows == 2) launch_gemv_tc_ring<C, P, 4, true, 2>(c, a, groups, sm_count, stream);
  else if (a.rows <= 4) launch_gemv_tc_ring<C, P, 3, true, 2>(c, a, groups, sm_count, stream);
  else launch_gemv_tc_ring<C, P, 2, true, 2>(c, a, groups, sm_count, stream);
}

}  // namespace dsv4::cuda
