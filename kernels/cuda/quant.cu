// KV fake-quant (MODEL.md §4.8) and Hadamard + FP4 QAT (§4.10, §4.11) ops.
#include <cmath>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/quant.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kKvGroup = 64;
constexpr int kFp4Group = 32;
constexpr int kMaxHadamard = 1024;  // one block holds the vector

// One warp per (row, group of 64) of dims [0, dim - rd).
__global__ void kv_act_quant_kernel(float* v, int64_t rows, int dim, int groups, bool e4m3) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t total = rows * groups;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / cuda::kWarp);
  for (int64_t w = blockIdx.x * int64_t{blockDim.x / cuda::kWarp} + threadIdx.x / cuda::kWarp;
       w < total; w += warps) {
    const int64_t row = w / groups;
    const int g = static_cast<int>(w % groups);
    cuda::kv_quant_group64(v + row * dim + g * kKvGroup, e4m3);
  }
}

// One block of `dim` threads per vector.
__global__ void hadamard_fp4_kernel(float* v, int64_t vectors, int dim, float scale, bool fp4) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  extern __shared__ float buf[];  // [dim]
  for (int64_t i = blockIdx.x; i < vectors; i += gridDim.x) {
    float* x = v + i * dim;
    __syncthreads();
    buf[threadIdx.x] = x[threadIdx.x];
    cuda::block_hadamard_fp4(buf, dim, scale, fp4);
    x[threadIdx.x] = buf[threadIdx.x];
  }
}

}  // namespace

float hadamard_scale(int dim) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim))); }

void check_kv_quant_dims(int dim, int rd) {
  DSV4_CHECK(dim - rd >= 0 && (dim - rd) % kKvGroup == 0, "dim=", dim, " rd=", rd);
}

void check_hadamard_dim(int dim) {
  DSV4_CHECK(dim >= kFp4Group && dim <= kMaxHadamard && (dim & (dim - 1)) == 0,
             "Hadamard dim=", dim);
}

void CudaOps::kv_act_quant(float* v, int rows, int dim, int rd, KvQuant variant) {
  check_kv_quant_dims(dim, rd);
  const int groups = (dim - rd) / kKvGroup;
  if (rows == 0 || groups == 0) return;
  activate();
  constexpr int kThreads = 256;
  const int64_t warps = static_cast<int64_t>(rows) * groups;
  cuda::launch(kv_act_quant_kernel, cuda::blocks_for(warps * cuda::kWarp, kThreads), kThreads, 0, stream_, v, rows, dim,
               groups, variant == KvQuant::e4m3);
}

void CudaOps::hadamard_fp4(float* v, int vectors, int dim, bool fp4) {
  check_hadamard_dim(dim);
  if (vectors == 0) return;
  activate();
  const unsigned blocks = static_cast<unsigned>(vectors > 65535 * 16 ? 65535 * 16 : vectors);
  cuda::launch(hadamard_fp4_kernel, blocks, dim, dim * sizeof(float), stream_, v, vectors, dim, hadamard_scale(dim),
               fp4);
}

}  // namespace dsv4
