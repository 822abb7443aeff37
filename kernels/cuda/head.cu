// Greedy argmax of logits rows (D10: ties to the lowest index; -1 for a row with a NaN).
#include <climits>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"

namespace dsv4 {

namespace {

constexpr int kThreads = 1024;

struct Best {
  float v;
  int64_t i;
};

// (v, i) beats (w, j) when v > w, or v == w at a lower index (a total order on the row,
// so the block reduction is exact whatever its shape).
__device__ Best better(Best a, Best b) { return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a; }

__global__ void argmax_kernel(const float* logits, int rows, int64_t n, int32_t* out) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  __shared__ float sv[kThreads];
  __shared__ int64_t si[kThreads];
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + static_cast<int64_t>(r) * n;
    Best b{-INFINITY, LLONG_MAX};
    bool nan = false;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = row[i];
      nan = nan || isnan(v);
      b = better(b, Best{v, i});
    }
    const int nan_seen = __syncthreads_or(nan);  // also orders the previous row's reads
    sv[threadIdx.x] = b.v;
    si[threadIdx.x] = b.i;
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      __syncthreads();
      if (threadIdx.x < half) {
        const Best o = better(Best{sv[threadIdx.x], si[threadIdx.x]},
                              Best{sv[threadIdx.x + half], si[threadIdx.x + half]});
        sv[threadIdx.x] = o.v;
        si[threadIdx.x] = o.i;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) out[r] = (nan_seen || n == 0) ? -1 : static_cast<int32_t>(si[0]);
    __syncthreads();
  }
}

}  // namespace

void CudaOps::argmax(const float* logits, int rows, int64_t n, int32_t* out) {
  if (rows == 0) return;
  refuse_in_capture("argmax (its result is host memory)", static_cast<size_t>(rows) * sizeof(int32_t));
  activate();
  auto* d_out = static_cast<int32_t*>(scratch(Slot::host_args, static_cast<size_t>(rows) * sizeof(int32_t)));
  const unsigned blocks = static_cast<unsigned>(rows > 65535 ? 65535 : rows);
  cuda::launch(argmax_kernel, blocks, kThreads, 0, stream_, logits, rows, n, d_out);
  DSV4_CUDA_CHECK(cudaMemcpyAsync(out, d_out, static_cast<size_t>(rows) * sizeof(int32_t),
                                  cudaMemcpyDeviceToHost, stream_));
  DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace dsv4
