// CPU linear realizations of MODEL.md §3.3: L-bf16 (f32 accumulation in ascending k,
// optional bf16 rounding of the activation) and L-island (f64 accumulation, one f32
// rounding), plus the grouped wo_a projection of §4.21 steps 2-3.
#pragma once
#include <cstdint>

#include "kernels/cpu/weight_cache.h"
#include "model/tensor_view.h"

namespace dsv4 {

// L-bf16 on an f32 weight w [out, in]: y[r*y_stride + n] = sum_k a(x[r*x_stride + k]) w[n,k],
// a = bf16 rounding when act_bf16, f32 accumulation in ascending k.
void cpu_lbf16(const float* w, int64_t out, int64_t in, const float* x, int64_t x_stride,
               int rows, bool act_bf16, float* y, int64_t y_stride);

// §4.21 steps 2-3 on an f32 weight wa [groups*o_rank, in]: group g maps o columns
// [g*in, (g+1)*in) through wa rows [g*o_rank, (g+1)*o_rank) into og columns
// [g*o_rank, (g+1)*o_rank). o [rows, groups*in], og [rows, groups*o_rank]. L-bf16.
void cpu_grouped_lbf16(const float* wa, int64_t o_rank, int64_t in, const float* o, int rows,
                       int groups, bool act_bf16, float* og);

// Ops::linear_fp8 / linear_bf16 / linear_island / grouped_wo_a on checkpoint views.
void cpu_linear_fp8(CpuWeightCache& cache, const Fp8Linear& w, const float* x, int rows,
                    bool act_bf16, float* y);
void cpu_linear_bf16(CpuWeightCache& cache, const TensorView& w, const float* x, int rows,
                     bool act_bf16, float* y);
void cpu_linear_island(CpuWeightCache& cache, const TensorView& w, const float* x, int rows,
                       float* y);
void cpu_grouped_wo_a(CpuWeightCache& cache, const Fp8Linear& wo_a, const float* o, int rows,
                      int groups, bool act_bf16, float* og);

}  // namespace dsv4
