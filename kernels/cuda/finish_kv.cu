// The window latent kv finished in place (MODEL.md §4.14 after x wkv^T): rmsnorm, rope,
// kv_act_quant as one kernel (cuda::finish_row: those ops' device functions, so their bits),
// for a prefill's rows at host positions (Ops::finish_kv) and for the decode step's row at a
// position read from device memory, also copied to its ring slot (Ops::finish_kv_at, §6.3);
// the kernel also finishes pooled compressor rows (cuda::finish_rows, compressor.cu).
// Twins: kernels/cpu/decode_step.
#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/finish_row.cuh"
#include "kernels/cuda/launch.cuh"

namespace dsv4 {

namespace {

// One block of kFinishThreads per row t of kv [rows, dim], finished at p (pos[t], or p0 + t
// step without pos) back into kv and, with a ring and p >= 0, into ring slot p mod slots
// (nothing for p < 0: its rope dims are NaN). Each thread copies back exactly the elements
// it loads, so the next row's load needs no barrier; finish_row's own barriers order
// everything else.
__global__ void finish_rows_kernel(float* kv, int64_t rows, int dim, cuda::FinishArgs f, const int32_t* pos,
                                   int64_t p0, int64_t step, float* ring, int slots) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  extern __shared__ float row[];  // [dim]
  __shared__ float red[cuda::kWarp];
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    float* x = kv + t * dim;
    const int64_t p = pos ? pos[t] : p0 + t * step;  // uniform
    for (int i = threadIdx.x; i < dim; i += blockDim.x) row[i] = x[i];
    __syncthreads();
    cuda::finish_row(row, dim, f, p, red);
    float* dst = ring == nullptr || p < 0 ? nullptr : ring + p % slots * dim;  // uniform
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
      x[i] = row[i];
      if (dst) dst[i] = row[i];
    }
  }
}

// The checked arguments of both ops but the device norm weight and rope table (the op's).
cuda::FinishArgs kv_finish_args(const char* op, const TensorView& norm, int dim, double eps, const RopeTable& rope,
                                KvQuant variant) {
  const int rd = rope.rope_dim;
  DSV4_CHECK(dim > 0 && dim <= cuda::kMaxFinishDim, op, ": dim ", dim);
  DSV4_CHECK(rd > 0 && rd % 2 == 0 && rd <= dim, op, ": rope_dim=", rd, " dim=", dim);
  check_kv_quant_dims(dim, rd);
  if (norm.numel() != dim)
    throw Error(cat(op, ": weight '", norm.name, "' has ", norm.numel(), " elements, rows have ", dim));
  return {{}, eps, nullptr, rd, rope.positions, variant == KvQuant::e4m3 ? cuda::Finish::kv_e4m3 : cuda::Finish::kv_clamp,
          0.0f};
}

}  // namespace

void cuda::finish_rows(cudaStream_t stream, float* rows, int64_t n, int d, const FinishArgs& f, const int32_t* pos,
                       int64_t p0, int64_t step, float* ring, int slots) {
  if (n > 0)
    launch(finish_rows_kernel, grid_rows(n), kFinishThreads, d * sizeof(float), stream, rows, n, d, f, pos, p0, step,
           ring, slots);
}

void CudaOps::finish_kv(float* kv, const TensorView& norm, int rows, int dim, double eps, const RopeTable& rope,
                        const int32_t* positions, KvQuant variant) {
  cuda::FinishArgs f = kv_finish_args("finish_kv", norm, dim, eps, rope, variant);
  check_rope_positions("finish_kv", rope, positions, rows);
  if (rows == 0) return;
  activate();
  f.norm = dense(norm, dim);
  f.fc = rope_table(rope);
  cuda::finish_rows(stream_, kv, rows, dim, f, stage_i32(Slot::host_args, positions, static_cast<size_t>(rows)), 0, 0,
                    nullptr, 0);
}

void CudaOps::finish_kv_at(float* kv, const TensorView& norm, int dim, double eps, const RopeTable& rope,
                           const int32_t* pos, KvQuant variant, float* ring, int slots) {
  DSV4_CHECK(slots > 0, "finish_kv_at: ", slots, " slots");
  cuda::FinishArgs f = kv_finish_args("finish_kv_at", norm, dim, eps, rope, variant);
  activate();
  f.norm = dense(norm, dim);
  f.fc = rope_table(rope);
  cuda::finish_rows(stream_, kv, 1, dim, f, pos, 0, 0, ring, slots);
}

}  // namespace dsv4
