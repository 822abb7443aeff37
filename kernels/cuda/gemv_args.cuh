// The problem every GEMV kernel of the decode linears takes (linear.cuh, gemv_tc.cuh) and
// the 16-byte loads they share.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"

namespace dsv4::cuda {

constexpr int kGemvWarps = 8;  // warps per block
constexpr int kGemvThreads = kGemvWarps * kWarp;

// One GEMV problem, G groups on grid.z (grouped wo_a, §4.21): for group g, output n < n_out,
// row r < rows: y[r*y_stride + g*y_group + n] = sum_k a(x[r*x_stride + g*x_group + k]) *
// W(w_row0 + g*w_group + n, k), k < k_in; a = bf16 rounding when act_bf16 (L-bf16).
struct GemvArgs {
  const float* x = nullptr;
  int64_t x_stride = 0, x_group = 0;
  float* y = nullptr;
  int64_t y_stride = 0, y_group = 0;
  int64_t w_row0 = 0, w_group = 0;
  int64_t k_in = 0, n_out = 0;
  int rows = 0;
  int splits = 1;  // warps per output set (fast path), a power of two <= kGemvWarps
  bool act_bf16 = false;
};

// The grid of a resident-block GEMV launch of `sets` output sets (kGemvWarps / a.splits
// per block): y the row blocks of rows_per_block rows, z the groups, x the blocks that fit
// on the device at once (per_sm a multiprocessor, shared by every row block and group),
// never more than the sets need.
inline dim3 resident_gemv_grid(const GemvArgs& a, int64_t sets, int rows_per_block, int groups, int sm_count,
                               int per_sm) {
  const int64_t per_block = kGemvWarps / a.splits;
  const int64_t need = (sets + per_block - 1) / per_block;
  const unsigned gy = static_cast<unsigned>((a.rows + rows_per_block - 1) / rows_per_block);
  const int64_t resident = std::max<int64_t>(1, int64_t{sm_count} * per_sm / (int64_t{groups} * gy));
  return dim3(static_cast<unsigned>(std::min(need, resident)), gy, static_cast<unsigned>(groups));
}

__device__ inline uint4 load_chunk(const void* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace dsv4::cuda
