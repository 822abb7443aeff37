// Dense linears (MODEL.md §3.3, §4.12, §4.21): L-bf16 over FP8 / BF16 weights and
// L-island, all through the fixed-order GEMV of linear.cuh.
#include "base/error.h"
#include "kernels/cuda/linear.cuh"
#include "kernels/cuda/weight_checks.h"

namespace dsv4 {

void CudaOps::linear_fp8(const Fp8Linear& w, const float* x, int rows, bool act_bf16, float* y) {
  linear_fp8_on(cuda::TcGemvKernel::automatic, w, x, rows, act_bf16, y);
}

void CudaOps::linear_fp8_on(cuda::TcGemvKernel kernel, const Fp8Linear& w, const float* x, int rows,
                            bool act_bf16, float* y) {
  const cuda::Fp8W d = fp8(w);
  gemv_rows(d, x, w.in(), act_bf16, y, w.out(), rows, kernel);
}

void CudaOps::linear_bf16(const TensorView& w, const float* x, int rows, bool act_bf16, float* y) {
  cuda::require_2d(w, "linear_bf16");
  const cuda::DenseW d = dense(w, w.dim(1));
  gemv_rows(d, x, w.dim(1), act_bf16, y, w.dim(0), rows);
}

void CudaOps::linear_island(const TensorView& w, const float* x, int rows, float* y) {
  cuda::require_2d(w, "linear_island");
  const cuda::DenseW d = dense(w, w.dim(1));
  gemv_rows(d, x, w.dim(1), false, y, w.dim(0), rows);
}

// §4.21 steps 2-3: group g multiplies o columns [g*cols, (g+1)*cols) by wo_a rows
// [g*Or, (g+1)*Or) into og columns [g*Or, (g+1)*Or).
void CudaOps::grouped_wo_a(const Fp8Linear& wo_a, const float* o, int rows, int groups,
                           bool act_bf16, float* og) {
  grouped_wo_a_on(cuda::TcGemvKernel::automatic, wo_a, o, rows, groups, act_bf16, og);
}

void CudaOps::grouped_wo_a_on(cuda::TcGemvKernel kernel, const Fp8Linear& wo_a, const float* o, int rows,
                              int groups, bool act_bf16, float* og) {
  const int64_t out = wo_a.out(), cols = wo_a.in();
  const int64_t o_rank = cuda::wo_a_group_rows(wo_a, groups, "grouped_wo_a");  // Or
  const int64_t o_width = cols * groups;    // nh*D
  const cuda::Fp8W d = fp8(wo_a);
  cuda::GemvArgs a;  // one launch, the groups on grid.z
  a.x = o;
  a.x_stride = o_width;
  a.x_group = cols;
  a.y = og;
  a.y_stride = out;
  a.y_group = o_rank;
  a.w_group = o_rank;
  a.k_in = cols;
  a.n_out = o_rank;
  a.rows = rows;
  a.act_bf16 = act_bf16;
  gemv(d, a, groups, kernel);
}

void cuda::linear_fp8_with(Ops& ops, TcGemvKernel kernel, const Fp8Linear& w, const float* x, int rows,
                           bool act_bf16, float* y) {
  cuda_backend(ops, "linear_fp8_with").linear_fp8_on(kernel, w, x, rows, act_bf16, y);
}

void cuda::grouped_wo_a_with(Ops& ops, TcGemvKernel kernel, const Fp8Linear& wo_a, const float* o, int rows,
                             int groups, bool act_bf16, float* og) {
  cuda_backend(ops, "grouped_wo_a_with").grouped_wo_a_on(kernel, wo_a, o, rows, groups, act_bf16, og);
}

}  // namespace dsv4
