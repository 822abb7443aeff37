// The finishing of a latent row — RMSNorm, rope of the last rd dims, then the kv quantizer
// or Hadamard + FP4 — on one row in shared memory by one block, shared by the compressor
// (MODEL.md §4.16 steps 4-6) and the window latent of a decode step (§4.14). The device
// functions are the rmsnorm, rope and quantizer ops' own, so the bits are those ops' run
// one after the other.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/quant.cuh"
#include "kernels/cuda/rope.cuh"

namespace dsv4::cuda {

// The block size of a finishing kernel: the rmsnorm op's, so the norm's partial sums are.
constexpr int kFinishThreads = kNormThreads;
constexpr int kMaxFinishDim = 4096;  // the row lives in shared memory (16 KiB)

// The last step: kv fake-quant (§4.8, both variants), Hadamard + FP4 (§4.10-§4.11), none.
enum class Finish : uint8_t { kv_clamp, kv_e4m3, hadamard_fp4, none };

// The norm weight [d], the rope table fc [n_positions, rd], the quantizer.
struct FinishArgs {
  DenseW norm;
  double eps;
  const float* fc;
  int rd;
  int64_t n_positions;
  Finish how;
  float hadamard_scale;  // hadamard_fp4 only
};

// row [d] in shared memory, roped at `position` (outside the table: NaN rope dims, as
// rope_dev), by every thread of a block of kFinishThreads; ends with a barrier. `red`
// holds >= 32 floats.
__device__ inline void finish_row(float* row, int d, const FinishArgs& f, int64_t position, float* red) {
  block_rmsnorm(row, f.norm, true, d, f.eps, row, red);
  __syncthreads();
  for (int pair = threadIdx.x; pair < f.rd / 2; pair += blockDim.x)
    rope_pair(row + d - f.rd + 2 * pair, f.fc, f.rd, f.n_positions, position, pair, false);
  __syncthreads();
  if (f.how == Finish::hadamard_fp4)  // uniform: the barriers inside see every thread
    block_hadamard_fp4(row, d, f.hadamard_scale, true);
  else if (f.how != Finish::none)
    block_kv_quant(row, d - f.rd, f.how == Finish::kv_e4m3);
  __syncthreads();
}

// rows [n, d] (device) finished in place by finish_row, one block of kFinishThreads a row;
// row t at pos[t] (device), or at p0 + t * step when pos is null; with a ring, row t is also
// copied to ring slot p mod slots for p >= 0 (finish_kv.cu).
void finish_rows(cudaStream_t stream, float* rows, int64_t n, int d, const FinishArgs& f, const int32_t* pos,
                 int64_t p0, int64_t step, float* ring, int slots);

}  // namespace dsv4::cuda
