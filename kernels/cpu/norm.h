// CPU reference RMS normalizations (MODEL.md §4.2, §4.3), oracle arm: sum of squares in
// f64, each output rounded once to f32.
#pragma once
#include <cstdint>

#include "kernels/cpu/weight_cache.h"
#include "model/tensor_view.h"

namespace dsv4 {

// 1 / sqrt(sum_i x_i^2 / n + eps), sum in f64 in ascending i.
double cpu_inv_rms(const float* x, int64_t n, double eps);

// §4.2: per row y = w * (x * rsqrt(mean(x^2) + eps)); x, y [rows, n], y may alias x.
void cpu_rmsnorm(CpuWeightCache& cache, const float* x, const TensorView& w, int rows, int n,
                 double eps, float* y);

// §4.3: each of `vectors` vectors of width n scaled in place by its inverse RMS.
void cpu_head_rms(float* v, int vectors, int n, double eps);

}  // namespace dsv4
