// Hyper-connection ops (MODEL.md §4.4, §4.5, §4.25 steps 1-3, SPECDECODE.md §2.3).
// hc_pre / hc_head: the mix partials (every (row, mix) dot split over fixed 128-column
// slices, f64), then per row the fixed-order combine of the slices feeding the collapse
// blocks (y) and, for hc_pre, the split (a warp per row: the f64 Sinkhorn, every arm §3.2) launched on
// the split stream so the serial chain runs beside the attention / MoE that need only y
// (CudaOps::join_split). The slices, the combine tree and the row tiles are fixed by the
// shapes, never by the row count (§6.3). Collapse / post / mean are elementwise in the
// CPU's order. For a prefill's many rows, hc_rows.cu's row-tiled collapse and hc_dmma.cu's
// tensor-core mix run instead (the mix tolerance-bound: cuda::HcKernels, hc_rows.cuh;
// CudaOps::hc_pre picks by the row count).
#include <algorithm>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/hc_device.cuh"
#include "kernels/cuda/hc_mix.cuh"
#include "kernels/cuda/hc_post.cuh"
#include "kernels/cuda/hc_pre_norm.cuh"
#include "kernels/cuda/hc_rows.cuh"
#include "kernels/cuda/launch.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

using namespace cuda::hc;

constexpr int kThreads = 256;
constexpr int kMixRowBlocks = 16;  // mix-partial blocks per slice: each walks its row tiles
                                   // (fn loaded once per block, not once per 8 rows)

void require_numel(const TensorView& t, int64_t n, const char* what) {
  if (t.numel() != n)
    throw Error(cat(what, ": tensor '", t.name, "' has ", t.numel(), " elements, expected ", n));
}

__global__ void __launch_bounds__(kMaxThreads)
hc_mix_partial_kernel(const float* h, int64_t rows, int64_t width, cuda::DenseW fn, int m, double* part) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  mix_partials(h, rows, width, fn, m, part);
}

// Sinkhorn on one warp (§4.4): M [hc, hc] lives in registers, lane l holding entries l and
// l + 32 (v[0], v[1]); `mat` is the warp's shared copy the row / column sums read.

// Writes the lane's entries to mat once every lane is done reading the previous copy.
__device__ void publish(double* mat, const double (&v)[2], int n) {
  const int lane = threadIdx.x % cuda::kWarp;
  __syncwarp();
#pragma unroll
  for (int r = 0; r < 2; ++r)
    if (lane + r * cuda::kWarp < n) mat[lane + r * cuda::kWarp] = v[r];
  __syncwarp();
}

// The sum over entry i's row (by_rows) or column of mat, ascending index from 0.0: the CPU's
// order (cpu_hc_split's softmax, normalize_rows / normalize_cols).
// Unrolled to kMaxHc so the loads issue together.
__device__ double line_sum(const double* mat, int i, int hc, bool by_rows) {
  const int j = i / hc, k = i % hc;
  double sum = 0.0;
#pragma unroll
  for (int q = 0; q < kMaxHc; ++q)
    if (q < hc) sum += mat[by_rows ? j * hc + q : q * hc + k];
  return sum;
}

// One normalization: every entry divided by its row (column) sum + eps.
__device__ void sinkhorn_normalize(double* mat, double (&v)[2], int hc, double eps, bool by_rows) {
  const int lane = threadIdx.x % cuda::kWarp, n = hc * hc;
  publish(mat, v, n);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = lane + r * cuda::kWarp;
    if (i < n) v[r] /= line_sum(mat, i, hc, by_rows) + eps;
  }
}

// §4.4 step 2 for row t on the calling warp, f64 throughout, outputs rounded once to f32; mix(j) =
// raw[j] * rs. `mat` [hc * hc] is the warp's shared scratch.
__device__ void hc_split_row(const double* raw, double rs, int64_t t, int hc, const SplitArgs& a,
                             double* mat) {
  const int lane = threadIdx.x % cuda::kWarp, n = hc * hc, z0 = 2 * hc;
  const double s1 = a.scale.at(1), s2 = a.scale.at(2);
  if (lane < hc)
    a.post[t * hc + lane] = static_cast<float>(2.0 * sigmoid((raw[hc + lane] * rs) * s1 + a.base.at(hc + lane)));
  double v[2] = {0.0, 0.0};  // entries lane, lane + 32 of M (j source, k destination)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = lane + r * cuda::kWarp;
    if (i < n) v[r] = (raw[z0 + i] * rs) * s2 + a.base.at(z0 + i);
  }
  // Row softmax plus eps on the output: the row max, exp, the sum in ascending k.
  publish(mat, v, n);
  double e[2] = {0.0, 0.0};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = lane + r * cuda::kWarp;
    if (i >= n) continue;
    double zmax = -INFINITY;
#pragma unroll
    for (int q = 0; q < kMaxHc; ++q)
      if (q < hc) zmax = fmax(zmax, mat[(i / hc) * hc + q]);
    e[r] = exp(v[r] - zmax);
  }
  publish(mat, e, n);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = lane + r * cuda::kWarp;
    if (i < n) v[r] = e[r] / line_sum(mat, i, hc, true) + a.hc_eps;
  }
  sinkhorn_normalize(mat, v, hc, a.hc_eps, false);
  for (int it = 1; it < a.iters; ++it) {
    sinkhorn_normalize(mat, v, hc, a.hc_eps, true);
    sinkhorn_normalize(mat, v, hc, a.hc_eps, false);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r)
    if (lane + r * cuda::kWarp < n) a.comb[t * n + lane + r * cuda::kWarp] = static_cast<float>(v[r]);
}

// §4.4 step 2's post and comb for kSplitWarps rows a block: the block's warps share out the
// rows' (m + 1) mix sums (one warp per sum, so a decode row's 25 take ~3 per warp), then
// warp w runs row t0 + w's Sinkhorn chain. A chain is serial, so a prefill chunk's rows run
// side by side warp by warp (not one 1024-thread block per row with one warp working).
constexpr int kSplitWarps = 8;
__global__ void __launch_bounds__(kSplitWarps * cuda::kWarp)
hc_split_kernel(const double* part, int64_t slices, int64_t rows, int hc, int hidden, int m, double norm_eps,
                SplitArgs a) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  __shared__ double raw[kSplitWarps][kMaxSums];
  __shared__ double mat[kSplitWarps][kMaxHc * kMaxHc];
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  for (int64_t t0 = int64_t{blockIdx.x} * kSplitWarps; t0 < rows; t0 += int64_t{gridDim.x} * kSplitWarps) {
    const int n = rows - t0 < kSplitWarps ? static_cast<int>(rows - t0) : kSplitWarps;  // rows here
    __syncthreads();  // the previous rows' raw is read
    for (int q = warp; q < n * (m + 1); q += kSplitWarps) {  // warp-uniform
      const double r = mix_sum(part, slices, t0 + q / (m + 1), m, q % (m + 1));
      if (lane == 0) raw[q / (m + 1)][q % (m + 1)] = r;
    }
    __syncthreads();
    if (warp < n) hc_split_row(raw[warp], mix_rs(raw[warp], m, hc, hidden, norm_eps), t0 + warp, hc, a, mat[warp]);
  }
}

// Grid (collapse blocks, rows), blockDim.x columns a block: pre and y (collapse_pre,
// collapse_sum).
__global__ void __launch_bounds__(kMaxThreads)
hc_apply_kernel(const float* h, const double* part, int64_t slices, int64_t rows, int hc, int hidden,
                int m, double norm_eps, SplitArgs a, float* y) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  __shared__ double raw[kMaxSums];
  __shared__ float pre[kMaxHc];
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const int warps = blockDim.x / cuda::kWarp;
  const int64_t d = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const bool col = d < hidden;
  for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    float x[kMaxHc];  // loaded first: these loads overlap the combine's
#pragma unroll
    for (int c = 0; c < kMaxHc; ++c) x[c] = col && c < hc ? h[(t * hc + c) * hidden + d] : 0.0f;
    __syncthreads();  // the previous row's raw / pre are read
    for (int q = warp; q < hc + 1; q += warps) {  // warp-uniform: the pre mixes and the sum of squares
      const int j = q < hc ? q : m;
      const double r = mix_sum(part, slices, t, m, j);
      if (lane == 0) raw[j] = r;
    }
    __syncthreads();
    const double rs = mix_rs(raw, m, hc, hidden, norm_eps);
    if (threadIdx.x < hc) pre[threadIdx.x] = collapse_pre(raw, rs, threadIdx.x, a);
    __syncthreads();
    if (col) y[t * hidden + d] = collapse_sum(pre, x, hc);
  }
}

// §4.5: out[t,k,d] = post[t,k] x[t,d] + sum_j comb[t,j,k] res[t,j,d], j ascending. Thread
// (column d, row t) reads x[t,d] and the hc values res[t,:,d] once and writes the hc outputs
// out[t,:,d]; blocks span the columns (grid.x) and the rows (grid.y, looping past 65535).
// Issue 13: the flat kernel of one thread per output (three 64-bit divisions to find
// (t, k, d), res read hc times) took 0.14 ms at 1,024 Flash rows against 40 us of bytes.
// Each output's operations and their order are the CPU's, so the bits are too.
__global__ void hc_post_kernel(const float* x, cuda::HcPost p, int64_t rows, int hidden) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= hidden) return;
  for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) cuda::hc_post_column(x[t * hidden + d], p, t, d, hidden);
}

// out[t*out_stride + d] = (sum_c h[t,c,d] in f64, c ascending) / hc.
__global__ void hc_mean_kernel(const float* h, int64_t rows, int hc, int hidden, float* out,
                               int out_stride) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * hidden;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / hidden;
    const int d = static_cast<int>(i % hidden);
    double sum = 0.0;
    for (int c = 0; c < hc; ++c) sum += h[(t * hc + c) * hidden + d];
    out[t * out_stride + d] = static_cast<float>(sum / hc);
  }
}

// Where the split block runs: `stream` waits for nothing of it until CudaOps::join_split.
struct SplitLaunch {
  cudaStream_t stream;
  cudaEvent_t fork, done;  // recorded after the mix partials / after the split
};

// The mix partials of h [rows, width] by `kernels`.
void launch_mix(cuda::HcKernels kernels, cudaStream_t stream, const float* h, int64_t rows, int64_t width,
                const cuda::DenseW& fn, int m, double* part) {
  if (kernels == cuda::HcKernels::dmma || kernels == cuda::HcKernels::dmma_pairs)
    return launch_mix_dmma(stream, h, rows, width, fn, m, part, kernels == cuda::HcKernels::dmma_pairs);
  if (kernels != cuda::HcKernels::shipped)
    return launch_mix_rows(stream, h, rows, width, fn, m, part, kernels == cuda::HcKernels::row_quads);
  const int mix_threads = cuda::kWarp * std::min(m + 1, kMaxWarps);
  const dim3 mix_grid(static_cast<unsigned>(slices_of(width)),
                      static_cast<unsigned>(std::min<int64_t>((rows + kRowTile - 1) / kRowTile, kMixRowBlocks)));
  cuda::launch(hc_mix_partial_kernel, mix_grid, mix_threads, 0, stream, h, rows, width, fn, m, part);
}

// y from the mix partials by `kernels`.
void launch_collapse(cuda::HcKernels kernels, cudaStream_t stream, const float* h, const double* part, int64_t rows,
                     int hc, int hidden, int m, double norm_eps, const SplitArgs& a, float* y) {
  if (kernels != cuda::HcKernels::shipped)
    return launch_collapse_rows(stream, h, part, rows, hc, hidden, m, norm_eps, a, y);
  const int collapse_blocks = (hidden + kMaxThreads - 1) / kMaxThreads;
  cuda::launch(hc_apply_kernel, dim3(collapse_blocks, cuda::grid_rows(rows)), kMaxThreads, 0, stream, h, part,
               slices_of(int64_t{hc} * hidden), rows, hc, hidden, m, norm_eps, a, y);
}

// §4.4 step 2 (post, comb) from the mix partials on side.stream, after what `stream` holds.
void launch_split(cudaStream_t stream, const SplitLaunch& side, const double* part, int64_t slices, int s, int hc,
                  int hidden, int m, double norm_eps, const SplitArgs& a) {
  DSV4_CUDA_CHECK(cudaEventRecord(side.fork, stream));
  DSV4_CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.fork, 0));
  cuda::launch(hc_split_kernel, cuda::grid_rows((s + kSplitWarps - 1) / kSplitWarps), kSplitWarps * cuda::kWarp, 0,
               side.stream, part, slices, s, hc, hidden, m, norm_eps, a);
  DSV4_CUDA_CHECK(cudaEventRecord(side.done, side.stream));
}

// §4.4 steps 1-3 (a.post set; the split on `side`) or §4.25 steps 1-3 on h [s, hc, hidden]
// with fn [m, hc*hidden]; part holds s * (m + 1) * slices doubles.
void launch_mix_collapse(cuda::HcKernels kernels, cudaStream_t stream, const float* h, int s, int hc, int hidden,
                         const cuda::DenseW& fn, int m, double norm_eps, const SplitArgs& a,
                         const SplitLaunch* side, double* part, float* y) {
  const int64_t width = static_cast<int64_t>(hc) * hidden, slices = slices_of(width);
  launch_mix(kernels, stream, h, s, width, fn, m, part);
  if (a.post) launch_split(stream, *side, part, slices, s, hc, hidden, m, norm_eps, a);
  launch_collapse(kernels, stream, h, part, s, hc, hidden, m, norm_eps, a, y);
}

}  // namespace

size_t cuda::hc_part_count(int64_t rows, int64_t width, int m) {
  return static_cast<size_t>(rows) * (m + 1) * slices_of(width);
}

void cuda::hc_mix_partials(HcKernels kernels, const float* h, int64_t rows, int64_t width, const void* fn,
                           bool fn_bf16, int m, double* part, cudaStream_t stream) {
  if (rows > 0) launch_mix(kernels, stream, h, rows, width, DenseW{fn, fn_bf16, width}, m, part);
}

void cuda::hc_collapse(HcKernels kernels, const float* h, const double* part, int64_t rows, int hc, int hidden,
                       int m, double norm_eps, const void* scale, const void* base, bool bf16, double hc_eps,
                       float* y, cudaStream_t stream) {
  DSV4_CHECK(hc >= 1 && hc <= kMaxHc, "hc=", hc);
  const SplitArgs a{DenseW{scale, bf16, 1}, DenseW{base, bf16, hc}, hc_eps, 0, nullptr, nullptr};
  if (rows > 0) launch_collapse(kernels, stream, h, part, rows, hc, hidden, m, norm_eps, a, y);
}

namespace {

// hc_pre's mixes m = (2 + hc) hc, its parameters refused by name unless they fit.
int hc_pre_mixes(const HcParams& p, int hc, int hidden, int sinkhorn_iters) {
  DSV4_CHECK(hc >= 1 && hc <= kMaxHc && sinkhorn_iters >= 1, "hc=", hc, " iters=", sinkhorn_iters);
  const int m = (2 + hc) * hc;
  require_numel(p.fn, m * int64_t{hc} * hidden, "hc_pre fn");
  require_numel(p.base, m, "hc_pre base");
  require_numel(p.scale, 3, "hc_pre scale");
  return m;
}

}  // namespace

void CudaOps::hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double norm_eps,
                     double hc_eps, int sinkhorn_iters, float* y, float* post, float* comb) {
  hc_pre_mix(s >= cuda::kHcRowTiledFrom, h, s, hc, hidden, p, norm_eps, hc_eps, sinkhorn_iters, y, post, comb);
}

void CudaOps::hc_pre_mix(bool prefill_mix, const float* h, int s, int hc, int hidden, const HcParams& p,
                         double norm_eps, double hc_eps, int sinkhorn_iters, float* y, float* post, float* comb) {
  const int m = hc_pre_mixes(p, hc, hidden, sinkhorn_iters);
  const int64_t width = static_cast<int64_t>(hc) * hidden;
  if (s == 0) return;
  activate();
  join_split();  // the previous split still reads hc_part and writes its post / comb
  const SplitArgs a{dense(p.scale, 3), dense(p.base, m), hc_eps, sinkhorn_iters, post, comb};
  const size_t parts = static_cast<size_t>(s) * (m + 1) * slices_of(width);
  double* part = static_cast<double*>(scratch(Slot::hc_part, parts * sizeof(double)));
  const SplitLaunch side{split_stream_, split_fork_, split_done_};
  // A prefill chunk's rows (from kHcRowTiledFrom, hc_rows.cuh) take the mix on the f64
  // tensor cores, two slices a block (HcKernels::dmma_pairs: the same exact products summed
  // in another fixed order, within law 2's tolerance of the shipped bits, never for decode
  // or verify rows, which stay below kHcRowTiledFrom) and the row-tiled collapse (3.0x
  // shipped's at 1,024 rows). dsv4-dev-hc at 871afa1, the mix at 1,024 / 2,048 rows:
  // row_quads 108.4 / 204.3 us, dmma 89.9 / 187.4, dmma_pairs 77.5 / 150.5 (y bit for bit
  // the shipped kernels' on its rows there). Every row's bits are its own either way.
  const auto kernels = prefill_mix ? cuda::HcKernels::dmma_pairs : cuda::HcKernels::shipped;
  launch_mix_collapse(kernels, stream_, h, s, hc, hidden, dense(p.fn, width), m, norm_eps, a,
                      &side, part, y);
  split_pending_ = true;
}

void CudaOps::hc_pre_norm(const float* h, int s, int hc, int hidden, const HcParams& p, double norm_eps,
                          double hc_eps, int sinkhorn_iters, const TensorView& norm, float* y, float* post,
                          float* comb, float* x) {
  const int m = hc_pre_mixes(p, hc, hidden, sinkhorn_iters);
  if (norm.numel() != hidden)
    throw Error(cat("hc_pre_norm: weight '", norm.name, "' has ", norm.numel(), " elements, rows have ", hidden));
  // One launch for a few rows (hc_pre_norm.cu), else the two ops: the same bits either way.
  // One row: the last-block kernel; 2-4 rows: the cluster tail where it takes the shapes
  // (sm_90; Flash), cluster8 before cluster4. dsv4-dev-hc at 387d9a6 on one H200, us a call
  // in a graph with PDL, last_block / cluster4 / cluster8: 1 row 10.5 / 11.5 / 11.3, 2 rows
  // 16.7 / 13.1 / 12.7, 4 rows 29.1 / 15.9 / 15.0; the last block's one-round tail at c62f3b8:
  // 1 row 8.8 us, 2 rows 13.6, 4 rows 23.2.
  auto kernel = cuda::HcNormKernel::last_block;
  if (s >= 2)
    for (const cuda::HcNormKernel k : {cuda::HcNormKernel::cluster8, cuda::HcNormKernel::cluster4})
      if (cuda::hc_pre_norm_takes(k, s, hc, hidden, m)) {
        kernel = k;
        break;
      }
  if (!cuda::hc_pre_norm_takes(kernel, s, hc, hidden, m)) {
    // A device step's rows (decode, verify) at any count: the shipped mix (R-I3), never the prefill's.
    hc_pre_mix(false, h, s, hc, hidden, p, norm_eps, hc_eps, sinkhorn_iters, y, post, comb);
    rmsnorm(y, norm, s, hidden, norm_eps, x);
    return;
  }
  const int64_t width = static_cast<int64_t>(hc) * hidden, slices = slices_of(width);
  activate();
  join_split();  // the previous split still reads hc_part and writes its post / comb
  const SplitArgs a{dense(p.scale, 3), dense(p.base, m), hc_eps, sinkhorn_iters, post, comb};
  double* part = static_cast<double*>(scratch(Slot::hc_part, cuda::hc_part_count(s, width, m) * sizeof(double)));
  auto weight = [](const cuda::DenseW& w) { return cuda::HcWeight{w.p, w.bf16}; };
  cuda::hc_pre_norm_fused(kernel,
                          cuda::HcPreNormArgs{h, s, hc, hidden, m, weight(dense(p.fn, width)), weight(a.scale),
                                              weight(a.base), weight(dense(norm, hidden)), norm_eps, hc_eps,
                                              ticket(Ticket::hc_pre_norm), part, y, x},
                          stream_);
  launch_split(stream_, SplitLaunch{split_stream_, split_fork_, split_done_}, part, slices, s, hc, hidden, m,
               norm_eps, a);
  split_pending_ = true;
}

void CudaOps::hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
                      int hc, int hidden, float* out) {
  DSV4_CHECK(hc >= 1 && hc <= kMaxHc, "hc=", hc);
  if (static_cast<int64_t>(s) * hidden == 0) return;
  activate();
  join_split();  // post and comb
  if (s >= cuda::kHcRowTiledFrom) return cuda::hc_post_rows(x, res, post, comb, s, hc, hidden, out, stream_);  // same bits
  const dim3 grid(static_cast<unsigned>((hidden + kThreads - 1) / kThreads), cuda::grid_rows(s));
  cuda::launch(hc_post_kernel, grid, kThreads, 0, stream_, x, cuda::HcPost{res, post, comb, hc, out}, int64_t{s},
               hidden);
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
  join_split();  // hc_part is the split's until then
  const SplitArgs a{dense(w.hc_head_scale, 1), dense(w.hc_head_base, hc), hc_eps, 0, nullptr, nullptr};
  const size_t parts = static_cast<size_t>(s) * (hc + 1) * slices_of(width);
  double* part = static_cast<double*>(scratch(Slot::hc_part, parts * sizeof(double)));
  launch_mix_collapse(cuda::HcKernels::shipped, stream_, h, s, hc, hidden, dense(w.hc_head_fn, width), hc,
                      norm_eps, a, nullptr, part, y);
}

void CudaOps::hc_mean(const float* h, int s, int hc, int hidden, float* out, int out_stride) {
  const int64_t n = static_cast<int64_t>(s) * hidden;
  if (n == 0) return;
  activate();
  cuda::launch(hc_mean_kernel, cuda::blocks_for(n, kThreads), kThreads, 0, stream_, h, s, hc, hidden, out, out_stride);
}

}  // namespace dsv4
