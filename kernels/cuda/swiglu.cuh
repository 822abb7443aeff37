// The routed and shared experts' SwiGLU on one element (MODEL.md §4.23 steps 2-4), shared
// by the decode MoE (moe.cu) and the prefill MoE (moe_prefill.cu): the CPU reference's f32
// arithmetic in its order.
#pragma once
#include "kernels/cuda/quant.cuh"

namespace dsv4::cuda {

// Clamp (u both sides, g from above; limit <= 0 off), then w * (silu(g) * u).
__device__ inline float swiglu(float g, float u, float w, float limit) {
  if (limit > 0.0f) {
    g = limit < g ? limit : g;
    u = clamp_keep_nan(u, -limit, limit);
  }
  return w * ((g * (1.0f / (1.0f + expf(-g)))) * u);
}

}  // namespace dsv4::cuda
