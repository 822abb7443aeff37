// The prefill MoE's routed-expert GEMM kernels (kernels/cuda/expert_gemm.cuh), all of
// them computing the same bits, and the prefill MoE on a chosen one: the engine
// (CudaOps::moe_gemm) runs ring_w16, 1.2-1.3x faster than regs at Flash shapes on an
// H200 (bench/dev/moe_prefill_variants.cu, docs/gpu-runs.md "sixth session"), regs where
// the weights are not cp.async-aligned; the twin test and the dev bench reach every one.
// A plain header, so host-compiled tests can call it.
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace dsv4::cuda {

enum class ExpertGemmKernel : int {
  regs,      // expert_gemm_kernel: 8 warps x two 16-row sets, the next chunk's weights in registers
  ring_w16,  // expert_gemm_ring_kernel<Sets 1>: 16 warps x one set, a cp.async ring of chunks
  ring_w8,   // expert_gemm_ring_kernel<Sets 2>: 8 warps x two sets, the same ring
};
inline const char* expert_gemm_kernel_name(ExpertGemmKernel k) {
  return k == ExpertGemmKernel::regs ? "regs" : k == ExpertGemmKernel::ring_w16 ? "ring_w16" : "ring_w8";
}

// ops.moe_gemm(...) (kernels/ops.h) on a CUDA backend with its routed experts on
// `kernel` (the ring kernels fall back to regs — the same bits — where the expert
// weights are not cp.async-aligned). Throws Error naming the backend when `ops` is not
// the CUDA one.
void moe_gemm_with(Ops& ops, ExpertGemmKernel kernel, const BlockWeights& b, const float* x, int rows,
                   const int32_t* sel, const float* wt, int k, float swiglu_limit, const Numerics& num, float* out);

}  // namespace dsv4::cuda
