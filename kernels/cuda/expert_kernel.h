// Which variant of the bf16 expert arm's decode routed-expert kernel (expert_mma_kernel,
// kernels/cuda/moe.cu; MODEL.md §4.23) computes a call: the engine's CudaOps::moe runs
// `shipped` (the native arm runs the fragment-layout kernel, expert_fp4.cuh, and refuses
// the other by name); the other is its compile-time variant (moe_experts.cuh MmaKnobs, moe.cu knobs_of), which
// feeds the same products in the same K order, so it gives the shipped bits. The dev
// bench (bench/dev/moe_variants.cu) and the twin test reach it to compare them bit for
// bit. A plain header, so host-compiled tests can call it.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace dsv4::cuda {

// lookup decodes the e2m1 codes by prmt lookups (the shipped kernel places their bits;
// moe_experts.cuh MmaKnobs). moe.cu walks the values up to kLastExpertKernel.
enum class ExpertKernel { shipped, lookup };
constexpr ExpertKernel kLastExpertKernel = ExpertKernel::lookup;

// ops.moe(...) (kernels/ops.h) on a CUDA backend with its routed experts on `kernel`.
// Throws Error naming the backend when `ops` is not the CUDA one.
void moe_with(Ops& ops, ExpertKernel kernel, const BlockWeights& b, const float* x, int rows, const int32_t* sel,
              const float* wt, int k, float swiglu_limit, const Numerics& num, float* out);

// Which kernel computes the native arm's prefill routed experts (CudaOps::moe_gemm,
// expert_fp4_gemm.cuh): the mma.sync kernel (expert_fp4_gemm.cu, any device), the wgmma
// kernel (sm90a/expert_fp4_wgmma.cu, compute capability 9.0 only) on its cp.async ring, or
// wgmma_tma, the same multiply on an mbarrier ring (bulk copies of the code units, no block
// barrier a chunk; 9.0 only); `automatic` is wgmma_tma for NVFP4 experts on a 9.0 device and
// mma_sync otherwise (fp4_gemm_kernel_on). All compute the same exact products in the same K
// order (docs/fp4-fragment-kernel.md "The wgmma prefill kernel", "The mbarrier ring").
enum class Fp4GemmKernel { automatic, mma_sync, wgmma, wgmma_tma };

// The kernels that run on `ops`'s device (mma_sync; wgmma and wgmma_tma on a 9.0 device). Throws
// Error naming the backend when `ops` is not the CUDA one.
std::vector<Fp4GemmKernel> fp4_gemm_kernels(const Ops& ops);

// ops.moe_gemm(...) on a CUDA backend with the native arm's routed experts on `kernel`
// (the bf16 arm ignores it); a kernel the device cannot run is refused by name.
void moe_gemm_with(Ops& ops, Fp4GemmKernel kernel, const BlockWeights& b, const float* x, int rows,
                   const int32_t* sel, const float* wt, int k, float swiglu_limit, const Numerics& num, float* out);

}  // namespace dsv4::cuda
