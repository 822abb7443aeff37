// Lightning-indexer scoring and top-k (MODEL.md §4.18 steps 4-7, §6.5; D7, D10).
// Scores: one block per (row, tile of kTileKeys keys) with the row's q in shared memory;
// each thread holds a kHeadsPerWarp x kKeysPerLane tile of 128-dim dots (each one chain in
// ascending dim), then one thread per key sums the heads in ascending order (D7), f32
// (serving arm). Top-k: one block per row radix-selects the width-th best key, compacts the
// winners in ascending key order and sorts them by (score desc, key asc), an exact total
// order (D10), so the selection and its order are deterministic and row-independent.
#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tile_load.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kScoreThreads = 256;
constexpr int kScoreWarps = kScoreThreads / cuda::kWarp;
constexpr int kTileKeys = 64;                           // keys per scoring block
constexpr int kKeysPerLane = kTileKeys / cuda::kWarp;   // lane owns keys lane + 32 b
constexpr int kHeadChunk = 64;                          // heads per q load
constexpr int kHeadsPerWarp = kHeadChunk / kScoreWarps; // warp w owns heads 8w..8w+7
constexpr int kMaxIndexDim = 256;

constexpr int kSelectThreads = 1024;
constexpr int kSelectWarps = kSelectThreads / cuda::kWarp;
constexpr int kDigitBits = 8;  // radix-select digit: 4 passes over a 32-bit key
constexpr int kBins = 1 << kDigitBits;
constexpr int kMaxWidth = 1024;  // the final sort network
constexpr uint64_t kNoCandidate = ~uint64_t{0};
static_assert(kSelectWarps == cuda::kWarp, "block_exclusive_count scans one warp count per lane");

// Row t's visible keys, within [0, n_max] (a device n_visible is not checked on the host).
__device__ int64_t visible_keys(const int32_t* n_visible, int t, int64_t n_max) {
  const int64_t n = n_visible[t];
  return n < 0 ? 0 : (n > n_max ? n_max : n);
}

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

// 32-bit key ascending in (score descending); -0 and +0 compare equal.
__device__ uint32_t order_key(float score) {
  const uint32_t u = f32_bits(score + 0.0f);
  return ~((u & 0x80000000u) ? ~u : (u | 0x80000000u));
}

// Exclusive count of `flag` over the block in thread order; *total = the block's count.
// `counts` holds kSelectWarps ints.
__device__ int block_exclusive_count(bool flag, int* counts, int* total) {
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const unsigned ballot = __ballot_sync(cuda::kFullMask, flag);
  __syncthreads();  // `counts` may still be read by a previous call
  if (lane == 0) counts[warp] = __popc(ballot);
  __syncthreads();
  int incl = counts[lane];  // kSelectWarps == kWarp: lane l scans warp l's count
  for (int o = 1; o < cuda::kWarp; o <<= 1) {
    const int x = __shfl_up_sync(cuda::kFullMask, incl, o);
    if (lane >= o) incl += x;
  }
  *total = __shfl_sync(cuda::kFullMask, incl, cuda::kWarp - 1);
  const int before = warp > 0 ? __shfl_sync(cuda::kFullMask, incl, warp - 1) : 0;
  return before + __popc(ballot & ((1u << lane) - 1u));
}

// idx[t*idx_stride + col0 + slot] = index_base + j of the slot-th best key, -1 past keep.
// 1. Radix select, most significant digit first: the keep-th smallest order key T and how
//    many keys equal to T are kept (need). Counts are integers, so their atomics are exact.
//    Skipped when keep == n (every key wins).
// 2. Compaction in ascending j of the keys < T and the first `need` keys == T (D10 ties).
// 3. Bitonic sort of the keep winners by (order key, j).
__global__ void __launch_bounds__(kSelectThreads)
indexer_select_kernel(const float* scores, int rows, int64_t n_max, const int32_t* n_visible, int width,
                      int index_base, int32_t* idx, int idx_stride, int col0) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  __shared__ unsigned hist[kBins][cuda::kWarp];  // one column per lane: no intra-warp conflicts
  __shared__ unsigned bin_count[kBins];
  __shared__ uint64_t best[kMaxWidth];
  __shared__ int counts[kSelectWarps];
  __shared__ unsigned pick[3];  // digit, need within it, keys in it
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  for (int t = blockIdx.x; t < rows; t += gridDim.x) {
    const int64_t n = visible_keys(n_visible, t, n_max);
    const float* st = scores + static_cast<int64_t>(t) * n_max;
    const int keep = static_cast<int>(n < width ? n : width);
    int32_t* out = idx + static_cast<int64_t>(t) * idx_stride + col0;
    __syncthreads();  // the previous row's `best` is written out
    const bool all = keep == n;  // every key wins: no threshold to find
    uint32_t prefix = 0;
    unsigned need = static_cast<unsigned>(keep), in_bin = 0;
    for (int shift = 32 - kDigitBits; !all && shift >= 0; shift -= kDigitBits) {
      for (int i = threadIdx.x; i < kBins * cuda::kWarp; i += blockDim.x) (&hist[0][0])[i] = 0;
      __syncthreads();
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const uint32_t u = order_key(st[j]);
        if ((static_cast<uint64_t>(u ^ prefix) >> (shift + kDigitBits)) == 0)  // in the chosen bins
          atomicAdd(&hist[(u >> shift) & (kBins - 1)][lane], 1u);
      }
      __syncthreads();
      for (int b = warp; b < kBins; b += kSelectWarps) {
        const unsigned c = __reduce_add_sync(cuda::kFullMask, hist[b][lane]);
        if (lane == 0) bin_count[b] = c;
      }
      __syncthreads();
      if (warp == 0) {  // lane owns bins [8 lane, 8 lane + 8); the bin holding rank `need`
        constexpr int per = kBins / cuda::kWarp;
        unsigned mine[per], sum = 0;
#pragma unroll
        for (int i = 0; i < per; ++i) sum += mine[i] = bin_count[per * lane + i];
        unsigned incl = sum;
        for (int o = 1; o < cuda::kWarp; o <<= 1) {
          const unsigned x = __shfl_up_sync(cuda::kFullMask, incl, o);
          if (lane >= o) incl += x;
        }
        unsigned r = need - (incl - sum);
        if (incl - sum < need && need <= incl) {
#pragma unroll
          for (int i = 0; i < per; ++i) {
            if (r <= mine[i]) {
              pick[0] = per * lane + i;
              pick[1] = r;
              pick[2] = mine[i];
              break;
            }
            r -= mine[i];
          }
        }
      }
      __syncthreads();
      prefix |= pick[0] << shift;
      need = pick[1];
      in_bin = pick[2];
    }
    // Winners in ascending j; ties at T beyond `need` are dropped only when there are some.
    const bool truncate = in_bin > need;
    int taken = 0, ties = 0;
    for (int64_t base = 0; keep > 0 && base < n; base += blockDim.x) {
      const int64_t j = base + threadIdx.x;
      const uint32_t u = j < n ? order_key(st[j]) : 0;
      const bool lt = j < n && (all || u < prefix), eq = j < n && !all && u == prefix;
      bool take = lt || eq;
      if (truncate) {
        int eq_total = 0;
        const int rank = block_exclusive_count(eq, counts, &eq_total);
        take = lt || (eq && ties + rank < static_cast<int>(need));
        ties += eq_total;
      }
      int total = 0;
      const int slot = block_exclusive_count(take, counts, &total);
      if (take) best[taken + slot] = (static_cast<uint64_t>(u) << 32) | static_cast<uint32_t>(j);
      taken += total;
    }
    int size = 1;
    while (size < keep) size <<= 1;
    for (int i = keep + threadIdx.x; i < size; i += blockDim.x) best[i] = kNoCandidate;
    for (int span = 2; span <= size; span <<= 1) {  // bitonic network, ascending
      for (int stride = span >> 1; stride > 0; stride >>= 1) {
        __syncthreads();
        for (int i = threadIdx.x; i < size; i += blockDim.x) {
          const int partner = i ^ stride;
          if (partner > i) {
            const bool ascending = (i & span) == 0;
            const uint64_t a = best[i], b = best[partner];
            if ((a > b) == ascending) {
              best[i] = b;
              best[partner] = a;
            }
          }
        }
      }
    }
    __syncthreads();
    for (int slot = threadIdx.x; slot < width; slot += blockDim.x)
      out[slot] = slot < keep ? index_base + static_cast<int32_t>(best[slot] & 0xFFFFFFFFu) : -1;
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
  if (width > kMaxWidth)
    throw Error(cat("indexer_topk: width ", width, " exceeds the CUDA top-k limit of ", kMaxWidth));
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
  const unsigned blocks = static_cast<unsigned>(rows > 65535 ? 65535 : rows);
  cuda::launch(indexer_select_kernel, blocks, kSelectThreads, 0, stream_, scores, rows, n_max, n_visible, width,
               index_base, idx, idx_stride, col0);
}

}  // namespace dsv4
