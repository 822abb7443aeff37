// Greedy argmax of logits rows (D10: ties to the lowest index; -1 for a row with a NaN).
#include <climits>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;
// A row is cut into kSlices slices, one block each, so a 129,280-entry vocabulary row is
// read by kSlices SMs instead of one (issue 12: one 1,024-thread block took 57 us); a
// second block per row reduces the slices' winners. `better` is a total order on (value,
// index), so the result is the row's argmax whatever the cut.
constexpr int kSlices = 64;

struct Best {
  float v;
  int64_t i;
};

// (v, i) beats (w, j) when v > w, or v == w at a lower index (a total order on the row,
// so the block reduction is exact whatever its shape).
__device__ Best better(Best a, Best b) { return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a; }

// The block's best of its threads' b (every thread gets it); nan: any thread saw a NaN.
__device__ Best block_best(Best b, bool& nan) {
  __shared__ float sv[kThreads];
  __shared__ int64_t si[kThreads];
  nan = __syncthreads_or(nan);  // also orders the previous use of sv / si
  sv[threadIdx.x] = b.v;
  si[threadIdx.x] = b.i;
  for (int half = kThreads / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half) {
      const Best o = better(Best{sv[threadIdx.x], si[threadIdx.x]}, Best{sv[threadIdx.x + half], si[threadIdx.x + half]});
      sv[threadIdx.x] = o.v;
      si[threadIdx.x] = o.i;
    }
  }
  __syncthreads();
  return Best{sv[0], si[0]};
}

// Grid (kSlices, rows): slice blockIdx.x of row blockIdx.y -> part[row * kSlices + slice]
// (a NaN anywhere in the slice: index -1).
__global__ void __launch_bounds__(kThreads) argmax_slices_kernel(const float* logits, int64_t n, Best* part) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t r = blockIdx.y, per = (n + kSlices - 1) / kSlices;
  const int64_t begin = blockIdx.x * per, end = begin + per < n ? begin + per : n;
  const float* row = logits + r * n;
  Best b{-INFINITY, LLONG_MAX};
  bool nan = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = row[i];
    nan = nan || isnan(v);
    b = better(b, Best{v, i});
  }
  b = block_best(b, nan);
  if (threadIdx.x == 0) part[r * kSlices + blockIdx.x] = nan ? Best{NAN, -1} : b;
}

// Block r: the best of row r's slices (-1 for a row with a NaN or no entries).
__global__ void __launch_bounds__(kThreads) argmax_rows_kernel(const Best* part, int64_t n, int32_t* out) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t r = blockIdx.x;
  Best b{-INFINITY, LLONG_MAX};
  bool nan = false;
  for (int s = threadIdx.x; s < kSlices; s += kThreads) {
    const Best p = part[r * kSlices + s];
    nan = nan || p.i < 0;
    b = better(b, p);
  }
  b = block_best(b, nan);
  if (threadIdx.x == 0) out[r] = (nan || n == 0) ? -1 : static_cast<int32_t>(b.i);
}

}  // namespace

void CudaOps::argmax(const float* logits, int rows, int64_t n, int32_t* out) {
  if (rows == 0) return;
  refuse_in_capture("argmax (its result is host memory)", static_cast<size_t>(rows) * sizeof(int32_t));
  activate();
  DSV4_CHECK(rows <= 65535, "argmax: ", rows, " rows (at most 65535 a call)");
  auto* part = static_cast<Best*>(scratch(Slot::f32_a, static_cast<size_t>(rows) * kSlices * sizeof(Best)));
  auto* d_out = static_cast<int32_t*>(scratch(Slot::host_args, static_cast<size_t>(rows) * sizeof(int32_t)));
  cuda::launch(argmax_slices_kernel, dim3(kSlices, static_cast<unsigned>(rows)), kThreads, 0, stream_, logits, n, part);
  cuda::launch(argmax_rows_kernel, static_cast<unsigned>(rows), kThreads, 0, stream_, part, n, d_out);
  DSV4_CUDA_CHECK(cudaMemcpyAsync(out, d_out, static_cast<size_t>(rows) * sizeof(int32_t),
                                  cudaMemcpyDeviceToHost, stream_));
  DSV4_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace dsv4
