// Hyper-connection ops (MODEL.md §4.4, §4.5, §4.25 steps 1-3, SPECDECODE.md §2.3).
// Mixes: one block per (row, mix) over a fixed tree (serving arm, f32); the Sinkhorn split
// in f64 exactly as the CPU reference (every arm, §3.2); collapse / post / mean
// elementwise in the CPU's order.
#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxHc = 8;

void require_numel(const TensorView& t, int64_t n, const char* what) {
  if (t.numel() != n)
    throw Error(cat(what, ": tensor '", t.name, "' has ", t.numel(), " elements, expected ", n));
}

// raw[t, j] = sum_k h_flat[t,k] fn[j,k] for j < m; raw[t, m] = sum_k h_flat[t,k]^2.
// grid (m + 1, rows); raw [rows, m + 1].
__global__ void hc_mix_kernel(const float* h, int64_t rows, int64_t width, cuda::DenseW fn, int m,
                              float* raw) {
  __shared__ float shared[cuda::kWarp];
  const int j = blockIdx.x;
  for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    const float* ht = h + t * width;
    float part = 0.0f;
    if (j < m) {
      for (int64_t k = threadIdx.x; k < width; k += blockDim.x) part += ht[k] * fn.at(j * width + k);
    } else {
      for (int64_t k = threadIdx.x; k < width; k += blockDim.x) part += ht[k] * ht[k];
    }
    const float sum = cuda::block_sum(part, shared);
    if (threadIdx.x == 0) raw[t * (m + 1) + j] = sum;
  }
}

__device__ double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

// mix[j] = raw[j] * rs with rs = 1/sqrt(sum_sq / width + norm_eps), in f64.
__device__ double mix_of(const float* raw_t, int j, int m, int64_t width, double norm_eps) {
  const double rs = 1.0 / sqrt(static_cast<double>(raw_t[m]) / static_cast<double>(width) + norm_eps);
  return static_cast<double>(raw_t[j]) * rs;
}

// §4.4 step 2, one thread per row, f64 throughout, outputs rounded once to f32.
__global__ void hc_split_kernel(const float* raw, int64_t rows, int hc, int64_t width,
                                double norm_eps, cuda::DenseW scale, cuda::DenseW base,
                                double hc_eps, int iters, float* pre, float* post, float* comb) {
  const int m = (2 + hc) * hc;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < rows;
       t += int64_t{gridDim.x} * blockDim.x) {
    const float* rt = raw + t * (m + 1);
    const double s0 = scale.at(0), s1 = scale.at(1), s2 = scale.at(2);
    for (int c = 0; c < hc; ++c) {
      pre[t * hc + c] = static_cast<float>(sigmoid(mix_of(rt, c, m, width, norm_eps) * s0 + base.at(c)) + hc_eps);
      post[t * hc + c] = static_cast<float>(2.0 * sigmoid(mix_of(rt, hc + c, m, width, norm_eps) * s1 + base.at(hc + c)));
    }
    double mat[kMaxHc * kMaxHc];  // [hc, hc], j source, k destination
    const int z0 = 2 * hc;
    for (int j = 0; j < hc; ++j) {
      double zmax = -INFINITY;
      for (int k = 0; k < hc; ++k) {
        const int i = z0 + j * hc + k;
        mat[j * hc + k] = mix_of(rt, i, m, width, norm_eps) * s2 + base.at(i);
        zmax = fmax(zmax, mat[j * hc + k]);
      }
      double sum = 0.0;
      for (int k = 0; k < hc; ++k) {
        mat[j * hc + k] = exp(mat[j * hc + k] - zmax);
        sum += mat[j * hc + k];
      }
      for (int k = 0; k < hc; ++k) mat[j * hc + k] = mat[j * hc + k] / sum + hc_eps;
    }
    for (int it = 0; it < iters; ++it) {
      if (it > 0) {  // row normalization, then the column normalization every iteration ends with
        for (int j = 0; j < hc; ++j) {
          double sum = 0.0;
          for (int k = 0; k < hc; ++k) sum += mat[j * hc + k];
          for (int k = 0; k < hc; ++k) mat[j * hc + k] /= sum + hc_eps;
        }
      }
      for (int k = 0; k < hc; ++k) {
        double sum = 0.0;
        for (int j = 0; j < hc; ++j) sum += mat[j * hc + k];
        for (int j = 0; j < hc; ++j) mat[j * hc + k] /= sum + hc_eps;
      }
    }
    for (int i = 0; i < hc * hc; ++i) comb[t * hc * hc + i] = static_cast<float>(mat[i]);
  }
}

// §4.25 step 2: pre[c] = sigma(mixh[c] * scale + base[c]) + hc_eps, f64, rounded to f32.
__global__ void hc_head_gate_kernel(const float* raw, int64_t rows, int hc, int64_t width,
                                    double norm_eps, cuda::DenseW scale, cuda::DenseW base,
                                    double hc_eps, float* pre) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * hc;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / hc;
    const int c = static_cast<int>(i % hc);
    const double mix = mix_of(raw + t * (hc + 1), c, hc, width, norm_eps);
    pre[i] = static_cast<float>(sigmoid(mix * static_cast<double>(scale.at(0)) + base.at(c)) + hc_eps);
  }
}

// §4.4 step 3: y[t, d] = sum_c pre[t,c] h[t,c,d], c ascending, f32.
__global__ void hc_collapse_kernel(const float* h, const float* pre, int64_t rows, int hc,
                                   int hidden, float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * hidden;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / hidden;
    const int d = static_cast<int>(i % hidden);
    float acc = 0.0f;
    for (int c = 0; c < hc; ++c) acc += pre[t * hc + c] * h[(t * hc + c) * hidden + d];
    y[i] = acc;
  }
}

// §4.5: out[t,k,d] = post[t,k] x[t,d] + sum_j comb[t,j,k] res[t,j,d], j ascending.
__global__ void hc_post_kernel(const float* x, const float* res, const float* post,
                               const float* comb, int64_t rows, int hc, int hidden, float* out) {
  const int64_t total = rows * hc * hidden;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int d = static_cast<int>(i % hidden);
    const int64_t tk = i / hidden;
    const int k = static_cast<int>(tk % hc);
    const int64_t t = tk / hc;
    float acc = post[t * hc + k] * x[t * hidden + d];
    for (int j = 0; j < hc; ++j) acc += comb[(t * hc + j) * hc + k] * res[(t * hc + j) * hidden + d];
    out[i] = acc;
  }
}

// out[t*out_stride + d] = (sum_c h[t,c,d] in f64, c ascending) / hc.
__global__ void hc_mean_kernel(const float* h, int64_t rows, int hc, int hidden, float* out,
                               int out_stride) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * hidden;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / hidden;
    const int d = static_cast<int>(i % hidden);
    double sum = 0.0;
    for (int c = 0; c < hc; ++c) sum += h[(t * hc + c) * hidden + d];
    out[t * out_stride + d] = static_cast<float>(sum / hc);
  }
}

}  // namespace

void CudaOps::hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double norm_eps,
                     double hc_eps, int sinkhorn_iters, float* y, float* post, float* comb) {
  DSV4_CHECK(hc >= 1 && hc <= kMaxHc && sinkhorn_iters >= 1, "hc=", hc, " iters=", sinkhorn_iters);
  const int m = (2 + hc) * hc;
  const int64_t width = static_cast<int64_t>(hc) * hidden;
  require_numel(p.fn, m * width, "hc_pre fn");
  require_numel(p.base, m, "hc_pre base");
  require_numel(p.scale, 3, "hc_pre scale");
  if (s == 0) return;
  activate();
  const cuda::DenseW fn = dense(p.fn, width), base = dense(p.base, m), scale = dense(p.scale, 3);
  float* raw = scratch_f32(Slot::f32_a, static_cast<size_t>(s) * (m + 1));
  float* pre = scratch_f32(Slot::f32_b, static_cast<size_t>(s) * hc);
  hc_mix_kernel<<<dim3(m + 1, cuda::grid_rows(s)), kThreads, 0, stream_>>>(h, s, width, fn, m, raw);
  DSV4_CUDA_LAUNCH_CHECK();
  hc_split_kernel<<<cuda::blocks_for(s, 64), 64, 0, stream_>>>(raw, s, hc, width, norm_eps, scale, base,
                                                            hc_eps, sinkhorn_iters, pre, post, comb);
  DSV4_CUDA_LAUNCH_CHECK();
  const int64_t n = static_cast<int64_t>(s) * hidden;
  hc_collapse_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream_>>>(h, pre, s, hc, hidden, y);
  DSV4_CUDA_LAUNCH_CHECK();
}

void CudaOps::hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
                      int hc, int hidden, float* out) {
  const int64_t n = static_cast<int64_t>(s) * hc * hidden;
  if (n == 0) return;
  activate();
  hc_post_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream_>>>(x, res, post, comb, s, hc,
                                                                         hidden, out);
  DSV4_CUDA_LAUNCH_CHECK();
}

void CudaOps::hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w,
                      double norm_eps, double hc_eps, float* y) {
  DSV4_CHECK(hc >= 1 && hc <= kMaxHc, "hc=", hc);
  const int64_t width = static_cast<int64_t>(hc) * hidden;
  require_numel(w.hc_head_fn, hc * width, "hc_head fn");
  require_numel(w.hc_head_base, hc, "hc_head base");
  require_numel(w.hc_head_scale, 1, "hc_head scale");
  if (s == 0) return;
  activate();
  const cuda::DenseW fn = dense(w.hc_head_fn, width), base = dense(w.hc_head_base, hc),
                     scale = dense(w.hc_head_scale, 1);
  float* raw = scratch_f32(Slot::f32_a, static_cast<size_t>(s) * (hc + 1));
  float* pre = scratch_f32(Slot::f32_b, static_cast<size_t>(s) * hc);
  hc_mix_kernel<<<dim3(hc + 1, cuda::grid_rows(s)), kThreads, 0, stream_>>>(h, s, width, fn, hc, raw);
  DSV4_CUDA_LAUNCH_CHECK();
  hc_head_gate_kernel<<<cuda::blocks_for(static_cast<int64_t>(s) * hc, 64), 64, 0, stream_>>>(
      raw, s, hc, width, norm_eps, scale, base, hc_eps, pre);
  DSV4_CUDA_LAUNCH_CHECK();
  const int64_t n = static_cast<int64_t>(s) * hidden;
  hc_collapse_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream_>>>(h, pre, s, hc, hidden, y);
  DSV4_CUDA_LAUNCH_CHECK();
}

void CudaOps::hc_mean(const float* h, int s, int hc, int hidden, float* out, int out_stride) {
  const int64_t n = static_cast<int64_t>(s) * hidden;
  if (n == 0) return;
  activate();
  hc_mean_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream_>>>(h, s, hc, hidden, out,
                                                                         out_stride);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4
