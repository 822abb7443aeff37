// Row RMS factor shared by the CUDA norms, hc mixes and the compressor (MODEL.md §4.2):
// sum of squares in f32 over a fixed tree (serving arm), the scalar tail in f64.
#pragma once
#include "kernels/cuda/device_math.cuh"

namespace dsv4::cuda {

// 1 / sqrt(sum_i x_i^2 / n + eps) for the row x [n]; every thread of the block calls it
// and gets the same value. `shared` holds >= 32 floats.
__device__ inline double block_inv_rms(const float* x, int64_t n, double eps, float* shared) {
  float part = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) part += x[i] * x[i];
  const float sum_sq = block_sum(part, shared);
  return 1.0 / sqrt(static_cast<double>(sum_sq) / static_cast<double>(n) + eps);
}

}  // namespace dsv4::cuda
