// Lightning-indexer scoring and top-k (MODEL.md §4.18 steps 4-7, §6.5; D7, D10).
// Scores: one block per (row, tile of kTileKeys keys) with the row's q in shared memory;
// each thread holds a kHeadsPerWarp x kKeysPerLane tile of 128-dim dots (each one chain in
// ascending dim), then one thread per key sums the heads in ascending order (D7), f32
// (serving arm). Top-k: indexer_select.cu, in the exact total order (score desc, key asc)
// of D10, so the selection and its order are deterministic and row-independent.
#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/indexer_device.cuh"
#include "kernels/cuda/indexer_select.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tile_load.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kScoreThreads = 256;
constexpr int kScoreWarps = kScoreThreads / cuda::kWarp;
// Keys per scoring block: 32, a key a lane (64 before): at context 4,096 a ratio-4 layer's
// 1,024 keys fill 32 blocks, not 16, each with half the chains. Bits unchanged: a dot's
// order (dims ascending) and the head sum's (heads ascending) do not depend on the tile.
constexpr int kTileKeys = 32;
constexpr int kKeysPerLane = kTileKeys / cuda::kWarp;   // lane owns keys lane + 32 b
constexpr int kHeadChunk = 64;                          // heads per q load
constexpr int kHeadsPerWarp = kHeadChunk / kScoreWarps; // warp w owns heads 8w..8w+7
constexpr int kMaxIndexDim = 256;

using cuda::visible_keys;

// score[t, j] = sum_h fl32(w[t,h] * wscale) * max(0, q[t,h,:] . keys[j,:]) for j < n_visible[t].
// Shared rows are padded by one float4 so the 32 lanes' key rows hit distinct bank groups.
__global__ void __launch_bounds__(kScoreThreads)
indexer_score_kernel(const float* q, const float* w, int rows, int heads, int dim, float wscale, const float* keys,
                     const int32_t* n_visible, int64_t n_max, bool vec,
                     float* __restrict__ scores) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  extern __shared__ float4 smem4[];
  const int stride4 = dim / 4 + 1, stride = 4 * stride4;
  float* ks = reinterpret_cast<float*>(smem4);  // [kTileKeys, stride] the tile's keys
  float* qs = ks + kTileKeys * stride;          // [kHeadChunk, stride] q rows of the chunk
  float* dots = qs + kHeadChunk * stride;       // [kHeadChunk, kTileKeys]
  const float4* ks4 = reinterpret_cast<const float4*>(ks);
  const float4* qs4 = reinterpret_cast<const float4*>(qs);
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTileKeys;
  for (int t = blockIdx.y; t < rows; t += gridDim.y) {
    const int64_t n = visible_keys(n_visible, t, n_max);
    if (j0 >= n) continue;  // uniform per block
    __syncthreads();        // the previous row's tiles are consumed
    for (int k = warp; k < kTileKeys; k += kScoreWarps)
      cuda::warp_copy_row_async(ks + k * stride, j0 + k < n ? keys + (j0 + k) * dim : nullptr, dim, vec);
    float score = 0.0f;  // thread k < kTileKeys: key j0 + k
    for (int h0 = 0; h0 < heads; h0 += kHeadChunk) {
      for (int h = warp; h < kHeadChunk; h += kScoreWarps)
        cuda::warp_copy_row_async(qs + h * stride,
                            h0 + h < heads ? q + (static_cast<int64_t>(t) * heads + h0 + h) * dim : nullptr,
                            dim, vec);
      cuda::copies_wait();
      __syncthreads();
      float acc[kHeadsPerWarp][kKeysPerLane] = {};
      for (int c = 0; c < dim / 4; ++c) {  // dims ascending
        float4 kx[kKeysPerLane];
#pragma unroll
        for (int b = 0; b < kKeysPerLane; ++b) kx[b] = ks4[(lane + cuda::kWarp * b) * stride4 + c];
#pragma unroll
        for (int a = 0; a < kHeadsPerWarp; ++a) {
          const float4 qx = qs4[(warp * kHeadsPerWarp + a) * stride4 + c];  // broadcast
#pragma unroll
          for (int b = 0; b < kKeysPerLane; ++b) {
            float& d = acc[a][b];  // fmaf: one rounding per term (--fmad=false only stops contraction)
            d = fmaf(qx.x, kx[b].x, d);
            d = fmaf(qx.y, kx[b].y, d);
            d = fmaf(qx.z, kx[b].z, d);
            d = fmaf(qx.w, kx[b].w, d);
          }
        }
      }
#pragma unroll
      for (int a = 0; a < kHeadsPerWarp; ++a)
#pragma unroll
        for (int b = 0; b < kKeysPerLane; ++b)
          dots[(warp * kHeadsPerWarp + a) * kTileKeys + lane + cuda::kWarp * b] = acc[a][b];
      __syncthreads();
      if (threadIdx.x < kTileKeys) {
        const int h_end = min(kHeadChunk, heads - h0);
        for (int h = 0; h < h_end; ++h) {  // heads ascending
          const float wp = w[static_cast<int64_t>(t) * heads + h0 + h] * wscale;  // D7
          score += wp * fmaxf(0.0f, dots[h * kTileKeys + threadIdx.x]);
        }
      }
      __syncthreads();  // qs and dots are reloaded by the next chunk
    }
    if (threadIdx.x < kTileKeys && j0 + threadIdx.x < n)
      scores[static_cast<int64_t>(t) * n_max + j0 + threadIdx.x] = score;
  }
}

}  // namespace

void CudaOps::indexer_topk(const float* q, const float* w, int rows, int heads, int dim,
                           float wscale, const float* keys, const int32_t* n_visible, int width,
                           int index_base, int32_t* idx, int idx_stride, int col0) {
  int64_t n_max = 0;
  for (int t = 0; t < rows; ++t) {
    DSV4_CHECK(n_visible[t] >= 0, "row ", t, " n_visible ", n_visible[t]);
    n_max = std::max<int64_t>(n_max, n_visible[t]);
  }
  activate();
  const int32_t* d_nvis = stage_i32(Slot::host_args, n_visible, static_cast<size_t>(rows));
  indexer_topk_dev(q, w, rows, heads, dim, wscale, keys, d_nvis, static_cast<int>(n_max), width,
                   index_base, idx, idx_stride, col0);
}

// The grid covers n_cap keys whatever the rows see (blocks past a row's n_visible return
// at once), so the launch is the same at every position (issue 12).
void CudaOps::indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim,
                               float wscale, const float* keys, const int32_t* n_visible, int n_cap,
                               int width, int index_base, int32_t* idx, int idx_stride, int col0) {
  DSV4_CHECK(col0 >= 0 && col0 + width <= idx_stride, "col0 ", col0, " width ", width, " stride ",
             idx_stride);
  if (width > cuda::kSelectMaxWidth)
    throw Error(cat("indexer_topk: width ", width, " exceeds the CUDA top-k limit of ", cuda::kSelectMaxWidth));
  if (dim % 4 != 0 || dim > kMaxIndexDim)
    throw Error(cat("indexer_topk: head dim ", dim, " is not a multiple of 4 up to ", kMaxIndexDim,
                    " (the CUDA scoring tile)"));
  if (heads <= 0) throw Error(cat("indexer_topk: ", heads, " heads; the indexer needs at least one"));
  DSV4_CHECK(n_cap >= 0, "indexer_topk: n_cap ", n_cap);
  if (rows == 0 || width == 0) return;
  activate();
  const int64_t n_max = n_cap;
  float* scores = scratch_f32(Slot::f32_a, static_cast<size_t>(rows) * std::max<int64_t>(n_max, 1));
  if (n_max > 0) {
    const size_t smem = static_cast<size_t>((kTileKeys + kHeadChunk) * (dim + 4) + kHeadChunk * kTileKeys) *
                        sizeof(float);
    allow_smem(reinterpret_cast<const void*>(indexer_score_kernel), smem);
    const bool vec = cuda::aligned16(q) && cuda::aligned16(keys);
    const dim3 grid(static_cast<unsigned>((n_max + kTileKeys - 1) / kTileKeys), cuda::grid_rows(rows));
    cuda::launch(indexer_score_kernel, grid, kScoreThreads, smem, stream_, q, w, rows, heads, dim, wscale, keys,
                 n_visible, n_max, vec, scores);
  }
  cuda::indexer_select(cuda::IndexerSelect::automatic, scores, rows, n_max, n_visible, width, index_base, idx,
                       idx_stride, col0, stream_);
}

}  // namespace dsv4
