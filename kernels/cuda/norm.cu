// RMSNorm and per-head RMS (MODEL.md §4.2, §4.3): one block per row, fixed-tree sum of
// squares, each element as the CPU reference writes it: fl32(w * (x * r)) in f64.
#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = cuda::kNormThreads;

// y may alias x (cuda::block_rmsnorm).
__global__ void rmsnorm_kernel(const float* x, cuda::DenseW w, bool weighted, int64_t rows,
                               int n, double eps, float* y) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  __shared__ float shared[cuda::kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    cuda::block_rmsnorm(x + r * n, w, weighted, n, eps, y + r * n, shared);
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows > 65535 * 16 ? 65535 * 16 : rows));
}

}  // namespace

void CudaOps::rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps, float* y) {
  if (w.numel() != n)
    throw Error(cat("rmsnorm: weight '", w.name, "' has ", w.numel(), " elements, rows have ", n));
  if (rows == 0) return;
  activate();
  const cuda::DenseW d = dense(w, n);
  cuda::launch(rmsnorm_kernel, row_blocks(rows), kThreads, 0, stream_, x, d, true, rows, n, eps, y);
}

void CudaOps::head_rms(float* v, int vectors, int n, double eps) {
  if (vectors == 0) return;
  activate();
  cuda::launch(rmsnorm_kernel, row_blocks(vectors), kThreads, 0, stream_, v, cuda::DenseW{}, false, vectors, n, eps, v);
}

}  // namespace dsv4
