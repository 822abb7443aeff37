// RoPE application (MODEL.md §4.7): interleaved pairs of the last rd dims, f32 complex
// multiply with the table entry of the row's position (bit-identical to the CPU twin); and
// the decode step's rope fused with its neighbour op (the per-head RMS before it, or the
// Hadamard + FP4 after it) through that op's device function, so with its bits.
#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/quant.cuh"
#include "kernels/cuda/rope.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;

// One thread per (row, head, pair); v [rows, heads, dim], fc [n_positions, rd].
__global__ void rope_kernel(float* v, int64_t rows, int heads, int dim, const float* fc, int rd,
                            int64_t n_positions, const int32_t* positions, bool inverse) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int pairs = rd / 2;
  const int64_t total = rows * heads * pairs;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int pair = static_cast<int>(i % pairs);
    const int64_t rh = i / pairs;  // row * heads + head
    cuda::rope_pair(v + rh * dim + (dim - rd) + 2 * pair, fc, rd, n_positions, positions[rh / heads], pair,
                    inverse);
  }
}

// One block of kNormThreads per vector (head_rms's kernel): §4.3 in place, then the rope
// pairs of the vector at its row's position.
__global__ void head_rms_rope_kernel(float* v, int64_t vectors, int heads, int dim, double eps,
                                     const float* fc, int rd, int64_t n_positions, const int32_t* positions) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  __shared__ float red[cuda::kWarp];
  for (int64_t i = blockIdx.x; i < vectors; i += gridDim.x) {
    float* x = v + i * dim;
    cuda::block_rmsnorm(x, cuda::DenseW{}, false, dim, eps, x, red);
    __syncthreads();  // the pairs read elements other threads normed (global, this block)
    for (int pair = threadIdx.x; pair < rd / 2; pair += blockDim.x)
      cuda::rope_pair(x + dim - rd + 2 * pair, fc, rd, n_positions, positions[i / heads], pair, false);
  }
}

// head_rms_rope_kernel's bits for dim == 2 * kNormThreads (Flash q: 512) in one pass over
// memory (issue 13: the kernel above reads a vector three times, ~2x its bytes' time at a
// prefill's 65,536 vectors). Thread x holds elements x and x + 256 of kVectors vectors in
// registers: the sum of squares as block_inv_rms's (0 + x^2, then + x'^2, f32, then
// block_sum's tree, the kVectors trees sharing one pair of barriers), the normed values as
// block_rmsnorm's, and the rope pair of elements 2i, 2i + 1 (adjacent lanes, exchanged by a
// shuffle) through rope_pair on both lanes. Each vector's bits depend on it alone.
constexpr int kRegsElems = 2;  // elements a thread holds per vector
template <int kVectors>
__global__ void __launch_bounds__(cuda::kNormThreads)
head_rms_rope_regs_kernel(float* v, int64_t vectors, int heads, double eps, const float* fc, int rd,
                          int64_t n_positions, const int32_t* positions) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  constexpr int kDim = kRegsElems * cuda::kNormThreads, kWarps = cuda::kNormThreads / cuda::kWarp;
  __shared__ float red[kVectors][kWarps];
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  for (int64_t i0 = int64_t{blockIdx.x} * kVectors; i0 < vectors; i0 += int64_t{gridDim.x} * kVectors) {
    float x[kVectors][kRegsElems], part[kVectors];
#pragma unroll
    for (int u = 0; u < kVectors; ++u)
#pragma unroll
      for (int e = 0; e < kRegsElems; ++e)
        x[u][e] = i0 + u < vectors ? v[(i0 + u) * kDim + e * cuda::kNormThreads + threadIdx.x] : 0.0f;
#pragma unroll
    for (int u = 0; u < kVectors; ++u) {
      part[u] = 0.0f;
#pragma unroll
      for (int e = 0; e < kRegsElems; ++e) part[u] += x[u][e] * x[u][e];
      part[u] = cuda::warp_sum(part[u]);
    }
    __syncthreads();  // the previous vectors' red is read
    if (lane == 0)
#pragma unroll
      for (int u = 0; u < kVectors; ++u) red[u][warp] = part[u];
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kVectors; ++u) {
      const float sum_sq = cuda::warp_sum(lane < kWarps ? red[u][lane] : 0.0f);
      const double inv = 1.0 / sqrt(static_cast<double>(sum_sq) / static_cast<double>(kDim) + eps);
      const int64_t p = i0 + u < vectors ? positions[(i0 + u) / heads] : 0;
#pragma unroll
      for (int e = 0; e < kRegsElems; ++e) {
        const int d = e * cuda::kNormThreads + threadIdx.x;
        float y = static_cast<float>(static_cast<double>(x[u][e]) * inv);
        const float other = __shfl_xor_sync(cuda::kFullMask, y, 1);  // every lane: d - (kDim - rd) is even with d
        if (d >= kDim - rd) {
          const bool first = (d - (kDim - rd)) % 2 == 0;
          float pair[2] = {first ? y : other, first ? other : y};
          cuda::rope_pair(pair, fc, rd, n_positions, p, (d - (kDim - rd)) / 2, false);
          y = first ? pair[0] : pair[1];
        }
        if (i0 + u < vectors) v[(i0 + u) * kDim + d] = y;
      }
    }
  }
}

// One block of `dim` threads per vector (hadamard_fp4's kernel): the vector to shared
// memory, its rope pairs, then §4.11 + §4.10.
__global__ void rope_hadamard_fp4_kernel(float* v, int64_t vectors, int heads, int dim, const float* fc, int rd,
                                         int64_t n_positions, const int32_t* positions, float scale) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  extern __shared__ float buf[];  // [dim]
  for (int64_t i = blockIdx.x; i < vectors; i += gridDim.x) {
    float* x = v + i * dim;
    __syncthreads();  // the previous vector's buf reads are done
    buf[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    for (int pair = threadIdx.x; pair < rd / 2; pair += blockDim.x)
      cuda::rope_pair(buf + dim - rd + 2 * pair, fc, rd, n_positions, positions[i / heads], pair, false);
    cuda::block_hadamard_fp4(buf, dim, scale, true);  // starts with a barrier
    x[threadIdx.x] = buf[threadIdx.x];
  }
}

void check_rope_dims(int rd, int dim) {
  DSV4_CHECK(rd > 0 && rd % 2 == 0 && rd <= dim, "rope_dim=", rd, " dim=", dim);
}

}  // namespace

void check_rope_positions(const char* op, const RopeTable& t, const int32_t* positions, int rows) {
  for (int r = 0; r < rows; ++r)
    if (positions[r] < 0 || positions[r] >= t.positions)
      throw Error(cat(op, ": position ", positions[r], " (row ", r, ") outside the table of ", t.positions,
                      " positions"));
}

void CudaOps::rope(float* v, int rows, int heads, int dim, const RopeTable& t,
                   const int32_t* positions, bool inverse) {
  const int rd = t.rope_dim;
  check_rope_dims(rd, dim);
  check_rope_positions("rope", t, positions, rows);
  if (rows == 0 || heads == 0) return;
  activate();
  rope_dev(v, rows, heads, dim, t, stage_i32(Slot::host_args, positions, static_cast<size_t>(rows)),
           inverse);
}

void CudaOps::rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                       const int32_t* positions, bool inverse) {
  const int rd = t.rope_dim;
  check_rope_dims(rd, dim);
  if (rows == 0 || heads == 0) return;
  activate();
  const float* fc = rope_table(t);
  const int64_t total = static_cast<int64_t>(rows) * heads * (rd / 2);
  cuda::launch(rope_kernel, cuda::blocks_for(total, kThreads), kThreads, 0, stream_, v, rows, heads, dim, fc, rd,
               t.positions, positions, inverse);
}

// The positions staged as rope's, then head_rms_rope_dev's kernels (the register-resident
// one at a prefill's many vectors), so the bits of head_rms then rope.
void CudaOps::head_rms_rope(float* v, int rows, int heads, int dim, double eps, const RopeTable& t,
                            const int32_t* positions) {
  check_rope_dims(t.rope_dim, dim);
  check_rope_positions("head_rms_rope", t, positions, rows);
  if (rows == 0 || heads == 0) return;
  activate();
  head_rms_rope_dev(v, rows, heads, dim, eps, t,
                    stage_i32(Slot::host_args, positions, static_cast<size_t>(rows)));
}

void CudaOps::head_rms_rope_dev(float* v, int rows, int heads, int dim, double eps, const RopeTable& t,
                                const int32_t* positions) {
  check_rope_dims(t.rope_dim, dim);
  const int64_t vectors = static_cast<int64_t>(rows) * heads;
  if (vectors == 0) return;
  activate();
  const int rd = t.rope_dim;
  if (dim == kRegsElems * cuda::kNormThreads && rd % 2 == 0) {
    // Four vectors a block for a prefill's many (their loads in flight together), one for a
    // decode step's 64 (a block each); the same bits.
    constexpr int kMany = 4;
    if (vectors >= int64_t{kMany} * 1024)
      cuda::launch(head_rms_rope_regs_kernel<kMany>, cuda::blocks_for(vectors, kMany), cuda::kNormThreads, 0, stream_,
                   v, vectors, heads, eps, rope_table(t), rd, t.positions, positions);
    else
      cuda::launch(head_rms_rope_regs_kernel<1>, cuda::blocks_for(vectors, 1), cuda::kNormThreads, 0, stream_, v,
                   vectors, heads, eps, rope_table(t), rd, t.positions, positions);
    return;
  }
  cuda::launch(head_rms_rope_kernel, cuda::blocks_for(vectors, 1), cuda::kNormThreads, 0, stream_, v, vectors, heads,
               dim, eps, rope_table(t), rd, t.positions, positions);
}

void CudaOps::rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                                    const int32_t* positions) {
  check_rope_dims(t.rope_dim, dim);
  check_hadamard_dim(dim);
  const int64_t vectors = static_cast<int64_t>(rows) * heads;
  if (vectors == 0) return;
  activate();
  cuda::launch(rope_hadamard_fp4_kernel, cuda::blocks_for(vectors, 1), dim, dim * sizeof(float), stream_, v, vectors,
               heads, dim, rope_table(t), t.rope_dim, t.positions, positions, hadamard_scale(dim));
}

}  // namespace dsv4
