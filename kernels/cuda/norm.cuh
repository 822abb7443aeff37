// Row RMS factor shared by the CUDA norms, hc mixes and the compressor (MODEL.md §4.2):
// sum of squares in f32 over a fixed tree (serving arm), the scalar tail in f64.
#pragma once
#include "kernels/cuda/device_math.cuh"

namespace dsv4::cuda {

// The rmsnorm op's block size. The RMS partial sums depend on it, so a kernel that norms a
// row inside a larger computation (the compressor) uses it too and gets the op's bits.
constexpr int kNormThreads = 256;

// 1 / sqrt(sum_i x_i^2 / n + eps) for the row x [n]; every thread of the block calls it
// and gets the same value. `shared` holds >= 32 floats. The first `sum_threads` threads
// (a multiple of 32, <= blockDim.x) take the squares; the others add 0 to block_sum's
// tree, whose second level already adds 0 for every lane past the summing warps, so a
// larger block gets the bits of a block of sum_threads.
__device__ inline double block_inv_rms(const float* x, int64_t n, double eps, float* shared, int sum_threads) {
  float part = 0.0f;
  if (threadIdx.x < sum_threads)
    for (int64_t i = threadIdx.x; i < n; i += sum_threads) part += x[i] * x[i];
  const float sum_sq = block_sum(part, shared);
  return 1.0 / sqrt(static_cast<double>(sum_sq) / static_cast<double>(n) + eps);
}
__device__ inline double block_inv_rms(const float* x, int64_t n, double eps, float* shared) {
  return block_inv_rms(x, n, eps, shared, blockDim.x);
}

// y = w * (x * inv_rms(x)) (weighted) or x * inv_rms(x), each element as the CPU reference
// writes it: fl32(w * (x * r)) in f64. Called by every thread of the block; y may alias x
// (every read of the sum precedes the barrier in block_sum, each thread then rewrites only
// the elements it reads).
// sum_threads: as block_inv_rms (the rmsnorm op's bits: kNormThreads).
__device__ inline void block_rmsnorm(const float* x, DenseW w, bool weighted, int64_t n, double eps,
                                     float* y, float* shared, int sum_threads) {
  const double inv = block_inv_rms(x, n, eps, shared, sum_threads);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = static_cast<double>(x[i]) * inv;  // normalize first, then the weight
    y[i] = static_cast<float>(weighted ? static_cast<double>(w.at(i)) * v : v);
  }
}
__device__ inline void block_rmsnorm(const float* x, DenseW w, bool weighted, int64_t n, double eps,
                                     float* y, float* shared) {
  block_rmsnorm(x, w, weighted, n, eps, y, shared, blockDim.x);
}

}  // namespace dsv4::cuda
