// Lightning-indexer scoring and top-k (MODEL.md §4.18 steps 4-7, §6.5; D7, D10).
// Scores: one warp per (row, key), heads ascending, f32 (serving arm). Top-k: one block
// per row sorts (score desc, key asc) composite keys with a bitonic network over chunks,
// an exact total order, so the selection and its order are deterministic.
#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kScoreWarps = 8;
constexpr int kSortHalf = 1024;            // best-so-far slots = new candidates per chunk
constexpr int kSortSize = 2 * kSortHalf;   // bitonic network size
constexpr uint64_t kNoCandidate = ~uint64_t{0};

// score[t, j] = sum_h fl32(w[t,h] * wscale) * max(0, q[t,h,:] . keys[j,:]) for j < n_visible[t].
__global__ void indexer_score_kernel(const float* q, const float* w, int rows, int heads, int dim,
                                     float wscale, const float* keys, const int32_t* n_visible,
                                     int64_t n_max, float* scores) {
  const int lane = threadIdx.x % cuda::kWarp;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kScoreWarps + threadIdx.x / cuda::kWarp;
  for (int t = blockIdx.y; t < rows; t += gridDim.y) {
    if (j >= n_visible[t]) continue;  // uniform per warp
    const float* key = keys + j * dim;
    float score = 0.0f;
    for (int h = 0; h < heads; ++h) {
      const float* qh = q + (static_cast<int64_t>(t) * heads + h) * dim;
      float dot = 0.0f;
      for (int i = lane; i < dim; i += cuda::kWarp) dot += qh[i] * key[i];
      dot = cuda::warp_sum(dot);
      const float wp = w[static_cast<int64_t>(t) * heads + h] * wscale;  // D7
      score += wp * fmaxf(0.0f, dot);
    }
    if (lane == 0) scores[static_cast<int64_t>(t) * n_max + j] = score;
  }
}

// Ascending composite key = (score descending, j ascending); -0 and +0 compare equal.
__device__ uint64_t rank_key(float score, int64_t j) {
  const uint32_t u = f32_bits(score + 0.0f);
  const uint32_t ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending in score
  return (static_cast<uint64_t>(~ordered) << 32) | static_cast<uint32_t>(j);
}

__device__ void bitonic_sort(uint64_t* buf) {
  for (int size = 2; size <= kSortSize; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int i = threadIdx.x; i < kSortSize; i += blockDim.x) {
        const int partner = i ^ stride;
        if (partner > i) {
          const bool ascending = (i & size) == 0;
          const uint64_t a = buf[i], b = buf[partner];
          if ((a > b) == ascending) {
            buf[i] = b;
            buf[partner] = a;
          }
        }
      }
    }
  }
  __syncthreads();
}

// idx[t*idx_stride + col0 + slot] = index_base + j of the slot-th best key, -1 past keep.
__global__ void indexer_topk_kernel(const float* scores, int rows, int64_t n_max,
                                    const int32_t* n_visible, int width, int index_base,
                                    int32_t* idx, int idx_stride, int col0) {
  __shared__ uint64_t buf[kSortSize];
  for (int t = blockIdx.x; t < rows; t += gridDim.x) {
    const int64_t n = n_visible[t];
    const float* st = scores + static_cast<int64_t>(t) * n_max;
    __syncthreads();
    for (int i = threadIdx.x; i < kSortHalf; i += blockDim.x) buf[i] = kNoCandidate;
    for (int64_t start = 0; start < n || start == 0; start += kSortHalf) {
      __syncthreads();
      for (int i = threadIdx.x; i < kSortHalf; i += blockDim.x) {
        const int64_t j = start + i;
        buf[kSortHalf + i] = j < n ? rank_key(st[j], j) : kNoCandidate;
      }
      bitonic_sort(buf);  // the best kSortHalf stay in buf[0, kSortHalf)
    }
    const int keep = static_cast<int>(n < width ? n : width);
    int32_t* out = idx + static_cast<int64_t>(t) * idx_stride + col0;
    for (int slot = threadIdx.x; slot < width; slot += blockDim.x)
      out[slot] = slot < keep ? index_base + static_cast<int32_t>(buf[slot] & 0xFFFFFFFFu) : -1;
  }
}

}  // namespace

void CudaOps::indexer_topk(const float* q, const float* w, int rows, int heads, int dim,
                           float wscale, const float* keys, const int32_t* n_visible, int width,
                           int index_base, int32_t* idx, int idx_stride, int col0) {
  DSV4_CHECK(col0 >= 0 && col0 + width <= idx_stride, "col0 ", col0, " width ", width, " stride ",
             idx_stride);
  if (width > kSortHalf)
    throw Error(cat("indexer_topk: width ", width, " exceeds the CUDA top-k limit of ", kSortHalf));
  if (rows == 0 || width == 0) return;
  int64_t n_max = 0;
  for (int t = 0; t < rows; ++t) {
    DSV4_CHECK(n_visible[t] >= 0, "row ", t, " n_visible ", n_visible[t]);
    n_max = std::max<int64_t>(n_max, n_visible[t]);
  }
  activate();
  const int32_t* d_nvis = stage_i32(Slot::host_args, n_visible, static_cast<size_t>(rows));
  float* scores = scratch_f32(Slot::f32_a, static_cast<size_t>(rows) * std::max<int64_t>(n_max, 1));
  if (n_max > 0) {
    const dim3 grid(static_cast<unsigned>((n_max + kScoreWarps - 1) / kScoreWarps), cuda::grid_rows(rows));
    indexer_score_kernel<<<grid, kScoreWarps * cuda::kWarp, 0, stream_>>>(
        q, w, rows, heads, dim, wscale, keys, d_nvis, n_max, scores);
    DSV4_CUDA_LAUNCH_CHECK();
  }
  const unsigned blocks = static_cast<unsigned>(rows > 65535 ? 65535 : rows);
  indexer_topk_kernel<<<blocks, 1024, 0, stream_>>>(scores, rows, n_max, d_nvis, width, index_base,
                                                    idx, idx_stride, col0);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4
