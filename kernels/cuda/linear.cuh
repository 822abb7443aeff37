// The GEMV kernel family of MODEL.md §3.3 (L-bf16 and L-island, serving arm: f32
// accumulation). One warp computes one output element of one row: lane l sums
// k = l, l+32, ... in ascending order, then a fixed butterfly combines the lanes. The
// launch shape depends only on the weight, never on the row count, so a row of a
// T-row call is bit-identical to the same row alone (SPECDECODE.md §6.3 "m-row twin").
#pragma once
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4 {
namespace cuda {

constexpr int kGemvWarps = 8;  // outputs per block

// y[r*y_stride + n] = sum_k a(x[r*x_stride + k]) * W(w_row0 + n, k), n < n_out, k < k_in;
// a = bf16 rounding when act_bf16 (L-bf16), identity otherwise (L-island).
template <class W>
__global__ void gemv_kernel(W w, int64_t w_row0, const float* x, int64_t x_stride, int64_t k_in,
                            bool act_bf16, float* y, int64_t y_stride, int64_t n_out, int rows) {
  const int lane = threadIdx.x % kWarp;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
  if (n >= n_out) return;  // whole warps exit together
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* xr = x + r * x_stride;
    float acc = 0.0f;
    for (int64_t k = lane; k < k_in; k += kWarp) {
      const float a = act_bf16 ? bf16_round(xr[k]) : xr[k];
      acc += a * w.at(w_row0 + n, k);
    }
    acc = warp_sum(acc);
    if (lane == 0) y[r * y_stride + n] = acc;
  }
}

}  // namespace cuda

template <class W>
void CudaOps::gemv(const W& w, int64_t w_row0, const float* x, int64_t x_stride, int64_t k_in,
                   bool act_bf16, float* y, int64_t y_stride, int64_t n_out, int rows) {
  if (rows == 0 || n_out == 0) return;
  activate();
  const dim3 grid(static_cast<unsigned>((n_out + cuda::kGemvWarps - 1) / cuda::kGemvWarps),
                  cuda::grid_rows(rows));
  cuda::gemv_kernel<<<grid, cuda::kGemvWarps * cuda::kWarp, 0, stream_>>>(
      w, w_row0, x, x_stride, k_in, act_bf16, y, y_stride, n_out, rows);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4
