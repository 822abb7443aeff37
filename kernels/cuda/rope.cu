// RoPE application (MODEL.md §4.7): interleaved pairs of the last rd dims, f32 complex
// multiply with the table entry of the row's position (bit-identical to the CPU twin).
#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/rope.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;

// One thread per (row, head, pair); v [rows, heads, dim], fc [n_positions, rd].
__global__ void rope_kernel(float* v, int64_t rows, int heads, int dim, const float* fc, int rd,
                            int64_t n_positions, const int32_t* positions, bool inverse) {
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

}  // namespace

void CudaOps::rope(float* v, int rows, int heads, int dim, const RopeTable& t,
                   const int32_t* positions, bool inverse) {
  const int rd = t.rope_dim;
  DSV4_CHECK(rd > 0 && rd % 2 == 0 && rd <= dim, "rope_dim=", rd, " dim=", dim);
  for (int r = 0; r < rows; ++r)
    if (positions[r] < 0 || positions[r] >= t.positions)
      throw Error(cat("rope: position ", positions[r], " (row ", r, ") outside the table of ",
                      t.positions, " positions"));
  if (rows == 0 || heads == 0) return;
  activate();
  rope_dev(v, rows, heads, dim, t, stage_i32(Slot::host_args, positions, static_cast<size_t>(rows)),
           inverse);
}

void CudaOps::rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                       const int32_t* positions, bool inverse) {
  const int rd = t.rope_dim;
  DSV4_CHECK(rd > 0 && rd % 2 == 0 && rd <= dim, "rope_dim=", rd, " dim=", dim);
  if (rows == 0 || heads == 0) return;
  activate();
  const float* fc = rope_table(t);
  const int64_t total = static_cast<int64_t>(rows) * heads * (rd / 2);
  rope_kernel<<<cuda::blocks_for(total, kThreads), kThreads, 0, stream_>>>(
      v, rows, heads, dim, fc, rd, t.positions, positions, inverse);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4
