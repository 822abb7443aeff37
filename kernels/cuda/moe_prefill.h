// The prefill MoE with its routed experts on the pipelined kernel (kernels/cuda/
// expert_gemm.cuh), which is not yet the engine's (CudaOps::moe_gemm runs the shipped one;
// both compute the same bits): reached from its twin test until the GPU has validated and
// timed it. A plain header, so host-compiled tests can call it.
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace dsv4::cuda {

// ops.moe_gemm(...) (kernels/ops.h) on a CUDA backend with the pipelined expert kernel
// (the shipped one where the expert weights are not cp.async-aligned). Throws Error
// naming the backend when `ops` is not the CUDA one.
void moe_gemm_pipelined(Ops& ops, const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                        const float* wt, int k, float swiglu_limit, const Numerics& num, float* out);

}  // namespace dsv4::cuda
