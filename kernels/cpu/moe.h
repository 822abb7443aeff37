// MoE router and experts (MODEL.md §4.22-§4.24, D4, D10, D16), CPU reference.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu/weight_cache.h"
#include "kernels/numerics.h"
#include "model/weights.h"

namespace dsv4 {

// §4.22: x [rows, hidden] -> sel, wt [rows, k]. Gate logits L-island (f64, rounded once),
// scores sqrt(softplus) in f32. Hash routing (b.tid2eid non-empty, [V*k]) takes row
// ids[t] (host [rows]) in stored order; score routing selects by (sc + bias desc, id asc).
// Weights from the unbiased scores: S summed in slot order in f32, wt = (w / S) * scale.
void cpu_route(CpuWeightCache& cache, const BlockWeights& b, const float* x, int rows,
               const int32_t* ids, int hidden, int n_experts, int k, float route_scale,
               int32_t* sel, float* wt);

// §4.23-§4.24: out[t] = sum over the row's experts in ascending id (f32, from 0) of
// expert(x[t], wt) in the num.expert_arm realization, then + the shared expert (L-bf16 on
// the FP8 weights, no routing weight). swiglu_limit <= 0 disables the clamp (D16).
// x, out [rows, hidden]; sel, wt [rows, k].
void cpu_moe(CpuWeightCache& cache, const BlockWeights& b, const float* x, int rows,
             const int32_t* sel, const float* wt, int k, float swiglu_limit,
             const Numerics& num, float* out);

// Intermediates of one expert evaluation: g, u [inter] before the clamp, h [inter] =
// wt * silu(clamped g) * clamped u (the input of the down projection).
struct SwigluTrace {
  std::vector<float> g, u, h;
};

// One SwiGLU expert (§4.23 steps 1-5) on exact f32 weights w1, w3 [inter, hidden],
// w2 [hidden, inter]; out [hidden].
// Arm A / shared expert: L-bf16 of a(x) and a(h), a = bf16 rounding when act_bf16
// (the shared expert passes wt = 1, which is exact).
void cpu_expert_lbf16(const float* w1, const float* w3, const float* w2, int hidden,
                      int inter, const float* x, float wt, float swiglu_limit, bool act_bf16,
                      float* out, SwigluTrace* trace = nullptr);
// Arm B (native): x given quantized (§4.9: e4m3 values x_q [hidden], scales x_s
// [hidden/128]); FP4GEMM per 32-block, h re-quantized per 128 after the wt multiply.
void cpu_expert_native(const float* w1, const float* w3, const float* w2, int hidden,
                       int inter, const float* x_q, const float* x_s, float wt,
                       float swiglu_limit, float* out, SwigluTrace* trace = nullptr);

// §4.9 as values: x [n] -> e4m3 values x_q [n] (code decoded) and scales x_s [n/128].
void cpu_act_quant_fp8_values(const float* x, int n, float* x_q, float* x_s);

}  // namespace dsv4
