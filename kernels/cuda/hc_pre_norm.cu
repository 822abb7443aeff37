// hc_pre_norm's fused kernels (issue 12; MODEL.md §4.4 steps 1-3, §4.2): hc_mix.cuh's mix
// partials, a last-block ticket (cuda::last_block_done), then y and x = rmsnorm(y) from the
// partials, each value by the operations of hc.cu's hc_apply_kernel and norm.cu's
// rmsnorm_kernel (the same device functions, the same order), so the bits are those of
// hc_pre then rmsnorm at any row count (SPECDECODE.md §6.3 R-I3).
//
// last_block: the last block alone reduces each row's five sums, collapses its 64 KiB of h
// (Flash) and norms it, row after row; its h, norm weights and pre's scale / base are loaded
// in one round beside the sums (issue 12's ncu at 387d9a6 saw three dependent rounds of h
// loads and the weight's loads behind the stores of x: ~8 of the launch's ~14 us at one row).
// cluster: the grid runs in clusters of kCluster blocks (sm_90); the cluster of the block
// that takes the last ticket does the rest, block b taking the columns of the rmsnorm
// threads [b, b + 1) * 256 / kCluster (columns j + 256 k): every block combines the rows'
// sums itself, collapses its columns (h loaded before the sums, so the loads overlap), sums
// its norm threads' squares in their order and their warps' butterflies, and writes the
// warp partials into every block's shared memory (DSMEM); after cluster.sync each block
// ends the rmsnorm's second butterfly over the 8 warp partials and writes x. fn, the norm
// weights and pre's scale / base are loaded before pdl_wait (weights: cuda/launch.cuh).
#include <cooperative_groups.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/hc_mix.cuh"
#include "kernels/cuda/hc_pre_norm.cuh"
#include "kernels/cuda/last_block.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm.cuh"

namespace dsv4::cuda::hc {

namespace {

constexpr int kFusedRows = 4;  // the most rows a fused launch takes: beyond a few rows the
                               // tail costs more than the two launches it saves
constexpr int kNormWarps = kNormThreads / kWarp;  // the rmsnorm op's warps (its butterflies)
constexpr int kTailCols = 2;                      // columns a cluster-kernel thread takes (all rows)
constexpr int kTailHc = 4;  // the cluster kernel's most hc (Flash's): its h values in registers
constexpr int kClusterThreads = 800;  // its most threads (hc 4's 25 mix warps): 80 registers a thread
constexpr size_t kDefaultSmem = 48 * 1024;        // dynamic shared memory without the attribute
constexpr size_t kMaxSmem = 227 * 1024;           // sm_90's most a block may opt in to

// The mix's threads for m sums: one warp a sum and the sum of squares, at most kMaxWarps.
constexpr int mix_threads(int m) { return kWarp * std::min(m + 1, kMaxWarps); }

// The last_block kernel's launch bound at hc: the block of hc_pre's m = (2 + hc) hc sums,
// at least the rmsnorm's threads (hc 4: 800 threads, 72 registers, 8 bytes of spills; the
// 1,024-thread bound gave it 64 registers and 80 bytes of spill loads).
constexpr int last_block_threads(int hc) { return std::max(mix_threads((2 + hc) * hc), kNormThreads); }

// The last_block kernel: the mix partials as hc.cu's hc_mix_partial_kernel (the same grid:
// slices, row tiles; fn's slice in registers before the wait), then the block that finishes
// last collapses each row as hc_apply_kernel does (raw, pre, the sums) into y and `row`, and
// norms `row` into x as rmsnorm_kernel does (its kNormThreads take the squares). A thread
// takes kCols = 24 / HC columns of a pass (24 h values in registers at any hc); the first
// pass's h, the norm weights and pre's scale / base are loaded before the sums, so those
// loads overlap the partials' (one round of global loads a row, not three, and none after
// the norm's sum: the weights wait in `wrow`). Block: max(the mix threads, kNormThreads).
// Dynamic smem: 2 x hidden floats.
template <int HC>
__global__ void __launch_bounds__(last_block_threads(HC))
hc_pre_norm_kernel(const float* h, int64_t rows, int hidden, DenseW fn, int m, double norm_eps, SplitArgs a,
                   DenseW norm, unsigned* ticket, double* part, float* y, float* x) {
  constexpr int kCols = 24 / HC;  // columns a thread loads before it stores (their loads overlap)
  const int64_t width = int64_t{HC} * hidden;
  MixWeights w;
  load_mix_weights(fn, width, m, w);  // weights only: before the wait (launch.cuh)
  pdl_wait();
  pdl_launch_dependents();
  mix_partials(h, rows, width, w, m, part);
  if (!last_block_done(ticket, gridDim.x * gridDim.y)) return;
  extern __shared__ float tail_smem[];
  float* row = tail_smem;           // [hidden] the row's y
  float* wrow = tail_smem + hidden;  // [hidden] the norm weights
  __shared__ double raw[kMaxSums];
  __shared__ float pre[kMaxHc];
  __shared__ float red[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  const int64_t slices = gridDim.x, pass = int64_t{kCols} * blockDim.x;
  const float scale0 = threadIdx.x < HC ? a.scale.at(0) : 0.0f;
  const float base_c = threadIdx.x < HC ? a.base.at(threadIdx.x) : 0.0f;
  float xs[kCols][kMaxHc];
  auto load = [&](int64_t t, int64_t d0) {  // one pass's h (and, for row 0, its norm weights)
#pragma unroll
    for (int i = 0; i < kCols; ++i) {
      const int64_t d = d0 + i * blockDim.x;
      if (t == 0 && d < hidden) wrow[d] = norm.at(d);
#pragma unroll
      for (int c = 0; c < kMaxHc; ++c) xs[i][c] = d < hidden && c < HC ? h[(t * HC + c) * hidden + d] : 0.0f;
    }
  };
  for (int64_t t = 0; t < rows; ++t) {
    __syncthreads();  // the previous row's raw, pre and row are read
    load(t, threadIdx.x);
    for (int q = warp; q < HC + 1; q += warps) {  // warp-uniform: the pre mixes and the sum of squares
      const int j = q < HC ? q : m;
      const double r = mix_sum(part, slices, t, m, j, /*via_l2=*/true);
      if (lane == 0) raw[j] = r;
    }
    __syncthreads();
    if (threadIdx.x < HC)
      pre[threadIdx.x] = collapse_pre(raw[threadIdx.x] * mix_rs(raw, m, HC, hidden, norm_eps), scale0, base_c, a.hc_eps);
    __syncthreads();
    for (int64_t d0 = threadIdx.x; d0 < hidden; d0 += pass) {
      if (d0 != threadIdx.x) load(t, d0);
#pragma unroll
      for (int i = 0; i < kCols; ++i) {
        const int64_t d = d0 + i * blockDim.x;
        if (d >= hidden) break;
        const float v = collapse_sum(pre, xs[i], HC);
        y[t * hidden + d] = v;
        row[d] = v;
      }
    }
    __syncthreads();
    block_rmsnorm(row, DenseW{wrow, false, hidden}, true, hidden, norm_eps, x + t * hidden, red, kNormThreads);
  }
}

// hc_pre_norm_kernel<hc> for hc in 1..kMaxHc.
template <int HC = 1>
auto* last_block_kernel(int hc) {
  if constexpr (HC < kMaxHc)
    if (hc != HC) return last_block_kernel<HC + 1>(hc);
  return hc_pre_norm_kernel<HC>;
}

// The L2 line of w's element i (prefetch.global.L2: no register waits for it).
__device__ inline void prefetch_l2(const DenseW& w, int64_t i) {
  const char* p = static_cast<const char*>(w.p) + i * (w.bf16 ? 2 : 4);
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// The cluster kernel's tail columns: rank b's of a row are r = k * kPerBlock + jl,
// jl < kPerBlock, the column d of rmsnorm thread b * kPerBlock + jl in its k-th step; a
// thread takes columns r = threadIdx.x + i * blockDim.x (i < kTailCols) of every row.
template <int kCluster>
struct TailCols {
  static constexpr int kPerBlock = kNormThreads / kCluster;  // rmsnorm threads a block takes
  static constexpr int kBlockNormWarps = kPerBlock / kWarp;
  static_assert(kNormThreads % (kCluster * kWarp) == 0, "a block takes whole rmsnorm warps");
  __host__ __device__ static int per_row(int hidden) { return (hidden + kNormThreads - 1) / kNormThreads * kPerBlock; }

  int hidden, rank, per_row_cols;
  struct Col {
    int r, d;
    bool valid;
  };
  __device__ Col at(int i) const {
    const int r = threadIdx.x + i * blockDim.x;
    const int d = rank * kPerBlock + r % kPerBlock + r / kPerBlock * kNormThreads;
    return {r, d, r < per_row_cols && d < hidden};
  }
};

// Grid: the slices (a multiple of kCluster) in clusters of kCluster; block >= the mix
// threads, kNormThreads and per_row / kTailCols; dynamic smem rows * per_row floats.
template <int kCluster>
__global__ void __launch_bounds__(kClusterThreads)
hc_pre_norm_cluster_kernel(const float* h, int rows, int hc, int hidden, DenseW fn, int m, double norm_eps,
                           SplitArgs a, DenseW norm, unsigned* ticket, double* part, float* y, float* x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using Cols = TailCols<kCluster>;
  const cg::cluster_group cluster = cg::this_cluster();
  auto started = cluster.barrier_arrive();  // waited on before the first DSMEM store
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t width = int64_t{hc} * hidden, slices = gridDim.x;
  const Cols cols{hidden, rank, Cols::per_row(hidden)};
  // The weights before the wait: fn's slice into registers; the L2 lines of this thread's
  // norm weights and of pre's scale / base, which the tail loads beside h.
  MixWeights w;
  load_mix_weights(fn, width, m, w);
#pragma unroll
  for (int i = 0; i < kTailCols; ++i) {
    const auto col = cols.at(i);
    if (col.valid && col.r % kWarp == 0) prefetch_l2(norm, col.d);  // 32 weights from a 32-aligned column
  }
  if (threadIdx.x == 0) {
    prefetch_l2(a.scale, 0);
    prefetch_l2(a.base, 0);
    prefetch_l2(a.base, m - 1);
  }
  pdl_wait();
  pdl_launch_dependents();
  mix_partials(h, rows, width, w, m, part);
  const bool last = last_block_done(ticket, gridDim.x);

  // Whether a block of this cluster took the last ticket: block b's answer in every block's took_last[b].
  __shared__ int took_last[kCluster];
  cluster.barrier_wait(std::move(started));  // every block of the cluster runs (its shared memory is there)
  if (threadIdx.x < kCluster) *cluster.map_shared_rank(&took_last[rank], threadIdx.x) = last;
  cluster.sync();
  bool tail = false;
#pragma unroll
  for (int b = 0; b < kCluster; ++b) tail = tail || took_last[b];
  if (!tail) return;  // the whole cluster: no DSMEM access follows

  extern __shared__ float ys[];  // [rows][per_row_cols] this block's y, for the squares
  __shared__ double raw[kFusedRows][kMaxSums];
  __shared__ float pre[kFusedRows][kMaxHc];
  __shared__ float warp_sq[kFusedRows][kNormWarps];  // the rmsnorm's warp partials, every block's copy
  __shared__ double inv[kFusedRows];
  // h and the weights first: these loads overlap the sums' (xs[..][c >= kTailHc]: 0, folded).
  float xs[kTailCols][kFusedRows][kMaxHc], wn[kTailCols];
  const float scale0 = a.scale.at(0), base_c = threadIdx.x < rows * hc ? a.base.at(threadIdx.x % hc) : 0.0f;
#pragma unroll
  for (int i = 0; i < kTailCols; ++i) {
    const auto col = cols.at(i);
    wn[i] = col.valid ? norm.at(col.d) : 0.0f;
#pragma unroll
    for (int t = 0; t < kFusedRows; ++t)
#pragma unroll
      for (int c = 0; c < kMaxHc; ++c)
        xs[i][t][c] = col.valid && t < rows && c < kTailHc && c < hc ? h[(int64_t{t} * hc + c) * hidden + col.d] : 0.0f;
  }
  for (int q = warp; q < rows * (hc + 1); q += warps) {  // warp-uniform: the pre mixes and the sum of squares
    const int t = q / (hc + 1), j = q % (hc + 1) < hc ? q % (hc + 1) : m;
    const double r = mix_sum(part, slices, t, m, j, /*via_l2=*/true);
    if (lane == 0) raw[t][j] = r;
  }
  __syncthreads();
  if (threadIdx.x < rows * hc) {
    const int t = threadIdx.x / hc, c = threadIdx.x % hc;
    pre[t][c] = collapse_pre(raw[t][c] * mix_rs(raw[t], m, hc, hidden, norm_eps), scale0, base_c, a.hc_eps);
  }
  __syncthreads();
  float yv[kTailCols][kFusedRows];
#pragma unroll
  for (int i = 0; i < kTailCols; ++i) {
    const auto col = cols.at(i);
#pragma unroll
    for (int t = 0; t < kFusedRows; ++t) {
      if (!col.valid || t >= rows) continue;
      yv[i][t] = collapse_sum(pre[t], xs[i][t], hc);
      y[int64_t{t} * hidden + col.d] = yv[i][t];
      ys[t * cols.per_row_cols + col.r] = yv[i][t];
    }
  }
  __syncthreads();
  // Warp (t, lw): rmsnorm thread j's squares in its order (block_inv_rms), its warp's butterfly.
  if (warp < rows * Cols::kBlockNormWarps) {
    const int t = warp / Cols::kBlockNormWarps, jl = warp % Cols::kBlockNormWarps * kWarp + lane;
    const int j = rank * Cols::kPerBlock + jl;
    float p = 0.0f;
    for (int k = 0; j + k * kNormThreads < hidden; ++k) {
      const float v = ys[t * cols.per_row_cols + k * Cols::kPerBlock + jl];
      p += v * v;
    }
    p = warp_sum(p);
    if (lane < kCluster) *cluster.map_shared_rank(&warp_sq[t][j / kWarp], lane) = p;
  }
  cluster.sync();  // every block holds every warp partial; no DSMEM access follows
  if (warp == 0)
    for (int t = 0; t < rows; ++t) {  // block_sum's second butterfly (lanes past the warps add 0), block_inv_rms
      const float sum_sq = warp_sum(lane < kNormWarps ? warp_sq[t][lane] : 0.0f);
      if (lane == 0) inv[t] = 1.0 / sqrt(static_cast<double>(sum_sq) / static_cast<double>(hidden) + norm_eps);
    }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kTailCols; ++i) {  // block_rmsnorm's element: normalize, then the weight
    const auto col = cols.at(i);
#pragma unroll
    for (int t = 0; t < kFusedRows; ++t)
      if (col.valid && t < rows)
        x[int64_t{t} * hidden + col.d] =
            static_cast<float>(static_cast<double>(wn[i]) * (static_cast<double>(yv[i][t]) * inv[t]));
  }
#endif
}

int cluster_size(HcNormKernel kernel) {
  return kernel == HcNormKernel::cluster8 ? 8 : kernel == HcNormKernel::cluster4 ? 4 : 1;
}

// Whether the current device launches clusters. Every device's attribute is queried once
// (a thread-safe static), not on each hc_pre_norm_takes: an op-by-op hc_pre_norm asks up to 4 times.
bool clusters_launch() {
  static const std::vector<bool> on = [] {
    int devices = 0;
    DSV4_CUDA_CHECK(cudaGetDeviceCount(&devices));
    std::vector<bool> v(static_cast<size_t>(devices));
    for (int d = 0; d < devices; ++d) {
      int attr = 0;
      DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&attr, cudaDevAttrClusterLaunch, d));
      v[static_cast<size_t>(d)] = attr != 0;
    }
    return v;
  }();
  int device = 0;
  DSV4_CUDA_CHECK(cudaGetDevice(&device));
  return on.at(static_cast<size_t>(device));
}

// The cluster kernel's tail columns a row and its block.
int tail_per_row(int cluster, int hidden) {
  return cluster == 8 ? TailCols<8>::per_row(hidden) : TailCols<4>::per_row(hidden);
}
int cluster_threads(int cluster, int hidden, int m) {
  const int tail = (tail_per_row(cluster, hidden) + kTailCols - 1) / kTailCols;
  return std::max({mix_threads(m), kNormThreads, (tail + kWarp - 1) / kWarp * kWarp});
}

DenseW dense(const HcWeight& w, int64_t cols) { return DenseW{w.p, w.bf16, cols}; }

}  // namespace

}  // namespace dsv4::cuda::hc

bool dsv4::cuda::hc_pre_norm_takes(HcNormKernel kernel, int rows, int hc, int hidden, int m) {
  using namespace hc;
  if (rows < 1 || rows > kFusedRows || hc < 1 || hc > kMaxHc || m + 1 > kMaxSums) return false;
  const int cluster = cluster_size(kernel);
  if (cluster == 1)  // row and wrow in shared memory; the block within the kernel's bound at hc
    return 2 * static_cast<size_t>(hidden) * sizeof(float) <= kMaxSmem &&
           std::max(mix_threads(m), kNormThreads) <= last_block_threads(hc);
  return hc <= kTailHc && slices_of(int64_t{hc} * hidden) % cluster == 0 &&
         cluster_threads(cluster, hidden, m) <= kClusterThreads && clusters_launch();
}

int dsv4::cuda::hc_pre_norm_resident_clusters(HcNormKernel kernel, int rows, int hc, int hidden, int m) {
  using namespace hc;
  const int cluster = cluster_size(kernel);
  DSV4_CHECK(cluster > 1 && hc_pre_norm_takes(kernel, rows, hc, hidden, m), "hc_pre_norm_resident_clusters: kernel ",
             static_cast<int>(kernel), " rows=", rows, " hidden=", hidden);
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim = {static_cast<unsigned>(cluster), 1, 1};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(slices_of(int64_t{hc} * hidden)));
  config.blockDim = dim3(static_cast<unsigned>(cluster_threads(cluster, hidden, m)));
  config.dynamicSmemBytes = sizeof(float) * rows * tail_per_row(cluster, hidden);
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  auto* k = cluster == 8 ? hc_pre_norm_cluster_kernel<8> : hc_pre_norm_cluster_kernel<4>;
  DSV4_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, k, &config));
  return clusters;
}

void dsv4::cuda::hc_pre_norm_fused(HcNormKernel kernel, const HcPreNormArgs& p, cudaStream_t stream) {
  using namespace hc;
  DSV4_CHECK(hc_pre_norm_takes(kernel, p.rows, p.hc, p.hidden, p.m), "hc_pre_norm fused kernel ",
             static_cast<int>(kernel), ": rows=", p.rows, " hc=", p.hc, " hidden=", p.hidden, " m=", p.m);
  const int64_t width = int64_t{p.hc} * p.hidden, slices = slices_of(width);
  const SplitArgs a{dense(p.scale, 3), dense(p.base, p.m), p.hc_eps, 0, nullptr, nullptr};
  const DenseW fn = dense(p.fn, width), norm = dense(p.norm, p.hidden);
  const int cluster = cluster_size(kernel);
  if (cluster == 1) {
    const size_t smem = 2 * static_cast<size_t>(p.hidden) * sizeof(float);  // row and wrow
    auto* k = last_block_kernel(p.hc);
    if (smem > kDefaultSmem)
      DSV4_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const int threads = std::max(mix_threads(p.m), kNormThreads);
    const dim3 grid(static_cast<unsigned>(slices), static_cast<unsigned>((p.rows + kRowTile - 1) / kRowTile));
    return launch(k, grid, threads, smem, stream, p.h, int64_t{p.rows}, p.hidden, fn, p.m, p.norm_eps, a, norm,
                  p.ticket, p.part, p.y, p.x);
  }
  // <= 25 KiB: per_row <= kTailCols x kClusterThreads (takes)
  const size_t smem = sizeof(float) * p.rows * tail_per_row(cluster, p.hidden);
  const int threads = cluster_threads(cluster, p.hidden, p.m);
  auto* k = cluster == 8 ? hc_pre_norm_cluster_kernel<8> : hc_pre_norm_cluster_kernel<4>;
  launch_clusters(static_cast<unsigned>(cluster), k, dim3(static_cast<unsigned>(slices)), threads, smem, stream,
                  p.h, p.rows, p.hc, p.hidden, fn, p.m, p.norm_eps, a, norm, p.ticket, p.part, p.y, p.x);
}
