// hc_pre's mix partials on the shipped grid (MODEL.md §4.4 step 1), shared by hc.cu's
// hc_mix_partial_kernel and hc_pre_norm.cu's fused kernels so every one writes the same
// partials bit for bit.
#pragma once
#include <cstdint>

#include "kernels/cuda/hc_device.cuh"

namespace dsv4::cuda::hc {

constexpr int kRowTile = 8;        // rows of h a mix-partial block stages at a time
constexpr int kMaxThreads = 1024;  // one warp per sum where it fits
constexpr int kMaxWarps = kMaxThreads / kWarp;
constexpr int kSumsPerWarp = (kMaxSums + kMaxWarps - 1) / kMaxWarps;

// The warps a block of blockDim.x threads gives the sums (one warp per sum where it fits).
__device__ inline int mix_warps() { return min(static_cast<int>(blockDim.x / kWarp), kMaxWarps); }

// A lane's fn values of the block's slice (blockIdx.x): the sums j = warp + q * mix_warps().
using MixWeights = float[kSumsPerWarp][kPerLane];

// Weights only: a kernel may load them before its pdl_wait (cuda/launch.cuh).
__device__ inline void load_mix_weights(const DenseW& fn, int64_t width, int m, MixWeights& w) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = mix_warps();
  const int64_t s = blockIdx.x;
#pragma unroll
  for (int q = 0; q < kSumsPerWarp; ++q)
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int j = warp + q * warps;
      const int64_t k = s * kSlice + i * kWarp + lane;
      w[q][i] = j < m && k < width ? fn.at(j * width + k) : 0.0f;
    }
}

// Blocks over (slice, row tile), warp w owning the sums j = w, w + warps, ... (warps =
// min(m + 1, 32)): part[(t * (m+1) + j) * slices + s] = sum over the slice's columns k of
// h[t,k] fn[j,k] for j < m, of h[t,k]^2 for j = m. Lane l takes columns l, l+32, l+64, l+96
// of the slice in ascending order, then the butterfly; f64 (the f32 products are exact in
// f64; §4.4 step 1 as the CPU's f64 mixes). The warp's fn values (w, load_mix_weights) are
// in registers before the h tile (one global read of h per block, then shared).
// The warps past the mix sums (a block sized for another job: hc_pre_norm.cu) skip them.
__device__ inline void mix_partials(const float* h, int64_t rows, int64_t width, const MixWeights& w, int m,
                                    double* part) {
  __shared__ float tile[kRowTile * kSlice];  // h[t0 + r, slice columns]
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = mix_warps();
  const int64_t slices = gridDim.x, s = blockIdx.x;
  for (int64_t t0 = int64_t{blockIdx.y} * kRowTile; t0 < rows; t0 += int64_t{gridDim.y} * kRowTile) {
    __syncthreads();  // the previous tile is read
    for (int e = threadIdx.x; e < kRowTile * kSlice; e += blockDim.x) {
      const int64_t t = t0 + e / kSlice, k = s * kSlice + e % kSlice;
      tile[e] = t < rows && k < width ? h[t * width + k] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kSumsPerWarp; ++q) {
      const int j = warp + q * warps;
      if (j > m) break;  // warp-uniform
#pragma unroll
      for (int r = 0; r < kRowTile; ++r) {
        if (t0 + r >= rows) break;  // block-uniform
        double p = 0.0;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          const double x = tile[r * kSlice + i * kWarp + lane];
          p += x * (j < m ? static_cast<double>(w[q][i]) : x);
        }
        p = warp_sum(p);
        if (lane == 0) part[((t0 + r) * (m + 1) + j) * slices + s] = p;
      }
    }
  }
}

// The weights, then the partials (after the caller's pdl_wait).
__device__ inline void mix_partials(const float* h, int64_t rows, int64_t width, const DenseW& fn, int m,
                                    double* part) {
  MixWeights w;
  load_mix_weights(fn, width, m, w);
  mix_partials(h, rows, width, w, m, part);
}

}  // namespace dsv4::cuda::hc
