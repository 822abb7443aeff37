// The prefill GEMM problem (gemm_prefill.cu: CudaOps::gemm runs one).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/cuda/linear.cuh"

namespace dsv4 {
namespace cuda {

// One (batched) GEMM: the GEMV's problem (linear.cuh GemvArgs: x, y, their strides and
// group offsets, k_in, n_out, rows, act_bf16; batch g = group g) with w the bf16 weight
// [batches * n_out, k_in] row-major (w_row0 0, w_group n_out), and the weight's name.
struct GemmProblem {
  const uint16_t* w = nullptr;
  GemvArgs a;
  int batches = 1;
  std::string name;
};

// y [rows, n_out] = x [rows, k_in] w^T, w bf16 [n_out, k_in].
GemmProblem linear_problem(const uint16_t* w, const float* x, int64_t k_in, int64_t n_out, int rows,
                           bool act_bf16, float* y, const std::string& name);

}  // namespace cuda
}  // namespace dsv4
