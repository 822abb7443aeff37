// Device pieces of the hyper-connection ops (MODEL.md §4.4, §4.25) shared by hc.cu (the
// shipped kernels) and hc_rows.cu (the row-tiled ones for a prefill's rows): the mix
// partials' slices, the fixed-order combine of a row's slices, rs, and the collapse's pre
// weights. One definition each, so both kernel sets round alike.
#pragma once
#include <cstdint>

#include "kernels/cuda/device_math.cuh"

namespace dsv4::cuda::hc {

constexpr int kMaxHc = 8;
constexpr int kMaxSums = (2 + kMaxHc) * kMaxHc + 1;  // the mixes and the sum of squares
constexpr int kSlice = 128;                          // columns of one mix partial
constexpr int kPerLane = kSlice / kWarp;             // a lane's columns of a slice

inline int64_t slices_of(int64_t width) { return (width + kSlice - 1) / kSlice; }

struct SplitArgs {  // §4.4 step 2; post / comb null: hc_head (§4.25, no split)
  DenseW scale, base;
  double hc_eps;
  int iters;
  float *post, *comb;
};

__device__ inline double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

// raw[j] = the slices of row t's partial j summed lane-strided in ascending slice, then the
// butterfly (one warp, the same order wherever it runs). via_l2: loads that bypass L1, for
// partials other blocks of the same grid wrote (cuda::last_block_done).
__device__ inline double mix_sum(const double* part, int64_t slices, int64_t t, int m, int j, bool via_l2 = false) {
  const double* pj = part + (t * (m + 1) + j) * slices;
  double r = 0.0;
  for (int64_t s = threadIdx.x % kWarp; s < slices; s += kWarp) r += via_l2 ? __ldcg(pj + s) : pj[s];
  return warp_sum(r);
}

// rs = 1/sqrt(raw[m] / width + norm_eps) (§4.4 step 1).
__device__ inline double mix_rs(const double* raw, int m, int hc, int hidden, double norm_eps) {
  return 1.0 / sqrt(raw[m] / static_cast<double>(int64_t{hc} * hidden) + norm_eps);
}

// pre[c] = sigma(mix(c) scale[0] + base[c]) + hc_eps rounded to f32 (§4.4 step 2 / §4.25
// step 2), mix(c) = raw[c] * rs; the second form takes scale[0] and base[c] already loaded.
__device__ inline float collapse_pre(double mix, float scale0, float base_c, double hc_eps) {
  return static_cast<float>(sigmoid(mix * static_cast<double>(scale0) + base_c) + hc_eps);
}
__device__ inline float collapse_pre(const double* raw, double rs, int c, const SplitArgs& a) {
  return collapse_pre(raw[c] * rs, a.scale.at(0), a.base.at(c), a.hc_eps);
}

// y[t, d] = sum_c pre[c] h[t, c, d] in ascending c, f32 (§4.4 step 3).
__device__ inline float collapse_sum(const float* pre, const float (&x)[kMaxHc], int hc) {
  float acc = 0.0f;
#pragma unroll
  for (int c = 0; c < kMaxHc; ++c)
    if (c < hc) acc += pre[c] * x[c];
  return acc;
}

// The row-tiled kernels (hc_rows.cu), same arguments and outputs as hc.cu's launches.
// quads: the four-rows-a-thread mix (HcKernels::row_quads), else two (row_tiled).
void launch_mix_rows(cudaStream_t stream, const float* h, int64_t rows, int64_t width, const DenseW& fn, int m,
                     double* part, bool quads);
void launch_collapse_rows(cudaStream_t stream, const float* h, const double* part, int64_t rows, int hc,
                          int hidden, int m, double norm_eps, const SplitArgs& a, float* y);
// The mix partials on the f64 tensor cores (hc_dmma.cu): the same layout, the f64 sums in
// another fixed order (tolerance-bound, hc_rows.cuh). pairs: two slices a block, each
// (row, sum)'s two partials one store (HcKernels::dmma_pairs), else one (dmma); same bits.
void launch_mix_dmma(cudaStream_t stream, const float* h, int64_t rows, int64_t width, const DenseW& fn, int m,
                     double* part, bool pairs);

}  // namespace dsv4::cuda::hc
