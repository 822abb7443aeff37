// Which variant of the decode MoE's routed-expert kernel (expert_mma_kernel, kernels/cuda/
// moe.cu; MODEL.md §4.23) computes a call: the engine's CudaOps::moe runs `shipped`; the
// others are its compile-time variants (moe_experts.cuh MmaKnobs, moe.cu knobs_of), which
// feed the same products in the same K order, so every one gives the shipped bits. The dev
// bench (bench/dev/moe_variants.cu) and the twin test reach them to compare them bit for
// bit. A plain header, so host-compiled tests can call it.
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace dsv4::cuda {

// ahead3 / ahead4 load 3 / 4 chunks a warp before multiplying (2 shipped); pipelined1 /
// pipelined2 load a warp's next group of 1 / 2 chunks before multiplying the current one,
// across work items; placed decodes the codes by placing their bits; occupancy asks the
// compiler for one more resident block per SM (fewer registers); pipelined1_placed /
// pipelined1_occupancy combine them. moe.cu walks the values up to kLastExpertKernel.
enum class ExpertKernel {
  shipped,
  ahead3,
  ahead4,
  pipelined1,
  pipelined2,
  placed,
  occupancy,
  pipelined1_placed,
  pipelined1_occupancy
};
constexpr ExpertKernel kLastExpertKernel = ExpertKernel::pipelined1_occupancy;

// ops.moe(...) (kernels/ops.h) on a CUDA backend with its routed experts on `kernel`.
// Throws Error naming the backend when `ops` is not the CUDA one.
void moe_with(Ops& ops, ExpertKernel kernel, const BlockWeights& b, const float* x, int rows, const int32_t* sel,
              const float* wt, int k, float swiglu_limit, const Numerics& num, float* out);

}  // namespace dsv4::cuda
