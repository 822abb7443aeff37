// CPU hyper-connection ops (MODEL.md §4.4, §4.5, §4.25 steps 1-3, SPECDECODE.md §2.3).
// Oracle arm: mixes and RMS scale in f64, Sinkhorn split in f64 with outputs rounded to
// f32, collapse and hc_post in f32.
#pragma once
#include <cstdint>

#include "kernels/cpu/weight_cache.h"
#include "model/weights.h"

namespace dsv4 {

// §4.4 step 1 for one row: mix[j] = (sum_k h_flat[k] fn[j,k]) * rs, j in [0, m), with
// rs = 1/sqrt(sum_k h_flat[k]^2 / width + norm_eps); h_flat [width], fn [m, width].
void cpu_hc_mixes(const float* h_flat, int64_t width, const float* fn, int m, double norm_eps,
                  double* mix);

// §4.4 step 1's dots split as the CUDA kernels split them (kernels/cuda/hc_rows.cuh), the
// reference of their partials: part[(t * (m + 1) + j) * slices + s] = sum over the columns
// k of 128-column slice s, ascending, of h[t,k] fn[j,k] (j < m) or h[t,k]^2 (j = m), in
// f64; h [rows, width], fn [m, width], slices = ceil(width / 128).
void cpu_hc_mix_partials(const float* h, int64_t rows, int64_t width, const float* fn, int m, double* part);

// How far `got` partials (that layout) are from `ref`: the worst over the sums j of
// max |got - ref| / max |ref| over every row and slice (each sum at its own scale: the
// sum of squares' partials are ~1e3 times a mix's); NaN or infinity where one differs.
double cpu_hc_partials_gap(const double* ref, const double* got, int64_t rows, int64_t width, int m);

// §4.4 step 2 for one row: mix [(2+hc)*hc] -> pre [hc], post [hc], comb [hc, hc]
// (comb[j][k], j = source stream), all in f64, rounded once to f32.
void cpu_hc_split(const double* mix, int hc, const float* scale, const float* base,
                  double hc_eps, int sinkhorn_iters, float* pre, float* post, float* comb);

// §4.4 step 3 for one row: y[d] = sum_c pre[c] h[c, d], c ascending, f32.
void cpu_hc_collapse(const float* h, const float* pre, int hc, int hidden, float* y);

// §4.4: h [s, hc, hidden] -> y [s, hidden], post [s, hc], comb [s, hc, hc].
void cpu_hc_pre(CpuWeightCache& cache, const float* h, int s, int hc, int hidden,
                const HcParams& p, double norm_eps, double hc_eps, int sinkhorn_iters,
                float* y, float* post, float* comb);

// §4.5: out[t,k,:] = post[t,k] x[t,:] + sum_j comb[t,j,k] res[t,j,:] (j ascending, f32).
void cpu_hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
                 int hc, int hidden, float* out);

// §4.25 steps 1-3: h [s, hc, hidden] -> y [s, hidden].
void cpu_hc_head(CpuWeightCache& cache, const float* h, int s, int hc, int hidden,
                 const HeadWeights& w, double norm_eps, double hc_eps, float* y);

// out[t*out_stride + d] = (sum_c h[t,c,d] in f64, c ascending) / hc.
void cpu_hc_mean(const float* h, int s, int hc, int hidden, float* out, int out_stride);

}  // namespace dsv4
