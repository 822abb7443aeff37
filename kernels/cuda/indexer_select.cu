// The indexer's top-k kernels (indexer_select.cuh): radix (select, compact, sort) and rank
// (a thread a key, its place in the order counted directly). Same output bit for bit: both
// order the keys by the exact total order (order_key(score) ascending, key ascending), which
// is (score descending, key ascending) with -0 = +0 (D10).
#include "kernels/cuda/indexer_select.cuh"

#include "base/cuda_check.h"
#include "base/error.h"
#include "base/scalar_formats.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/indexer_device.cuh"
#include "kernels/cuda/launch.cuh"

namespace dsv4::cuda {

namespace {

constexpr int kSelectThreads = 1024;
constexpr int kSelectWarps = kSelectThreads / kWarp;
constexpr int kDigitBits = 8;  // radix-select digit: 4 passes over a 32-bit key
constexpr int kBins = 1 << kDigitBits;
constexpr uint64_t kNoCandidate = ~uint64_t{0};
static_assert(kSelectWarps == kWarp, "block_exclusive_count scans one warp count per lane");

constexpr int kRankThreads = 128;  // keys a rank block places
constexpr uint32_t kAfterAll = 0xFFFFFFFFu;  // pads the rank kernel's keys: never below a key

// 32-bit key ascending in (score descending); -0 and +0 compare equal.
__device__ uint32_t order_key(float score) {
  const uint32_t u = f32_bits(score + 0.0f);
  return ~((u & 0x80000000u) ? ~u : (u | 0x80000000u));
}

// Exclusive count of `flag` over the block in thread order; *total = the block's count.
// `counts` holds kSelectWarps ints.
__device__ int block_exclusive_count(bool flag, int* counts, int* total) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const unsigned ballot = __ballot_sync(kFullMask, flag);
  __syncthreads();  // `counts` may still be read by a previous call
  if (lane == 0) counts[warp] = __popc(ballot);
  __syncthreads();
  int incl = counts[lane];  // kSelectWarps == kWarp: lane l scans warp l's count
  for (int o = 1; o < kWarp; o <<= 1) {
    const int x = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += x;
  }
  *total = __shfl_sync(kFullMask, incl, kWarp - 1);
  const int before = warp > 0 ? __shfl_sync(kFullMask, incl, warp - 1) : 0;
  return before + __popc(ballot & ((1u << lane) - 1u));
}

// idx[t*idx_stride + col0 + slot] = index_base + j of the slot-th best key, -1 past keep.
// 1. Radix select, most significant digit first: the keep-th smallest order key T and how
//    many keys equal to T are kept (need). Counts are integers, so their atomics are exact.
//    Skipped when keep == n (every key wins).
// 2. Compaction in ascending j of the keys < T and the first `need` keys == T (D10 ties).
// 3. Bitonic sort of the keep winners by (order key, j).
// Rows of at most min_keys visible keys are the rank kernel's (skipped here).
__global__ void __launch_bounds__(kSelectThreads)
indexer_radix_kernel(const float* scores, int rows, int64_t n_max, const int32_t* n_visible, int64_t min_keys,
                     int width, int index_base, int32_t* idx, int idx_stride, int col0) {
  pdl_wait();
  pdl_launch_dependents();
  __shared__ unsigned hist[kBins][kWarp];  // one column per lane: no intra-warp conflicts
  __shared__ unsigned bin_count[kBins];
  __shared__ uint64_t best[kSelectMaxWidth];
  __shared__ int counts[kSelectWarps];
  __shared__ unsigned pick[3];  // digit, need within it, keys in it
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int t = blockIdx.x; t < rows; t += gridDim.x) {
    const int64_t n = visible_keys(n_visible, t, n_max);
    if (n <= min_keys) continue;  // uniform per block
    const float* st = scores + static_cast<int64_t>(t) * n_max;
    const int keep = static_cast<int>(n < width ? n : width);
    int32_t* out = idx + static_cast<int64_t>(t) * idx_stride + col0;
    __syncthreads();  // the previous row's `best` is written out
    const bool all = keep == n;  // every key wins: no threshold to find
    uint32_t prefix = 0;
    unsigned need = static_cast<unsigned>(keep), in_bin = 0;
    for (int shift = 32 - kDigitBits; !all && shift >= 0; shift -= kDigitBits) {
      for (int i = threadIdx.x; i < kBins * kWarp; i += blockDim.x) (&hist[0][0])[i] = 0;
      __syncthreads();
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const uint32_t u = order_key(st[j]);
        if ((static_cast<uint64_t>(u ^ prefix) >> (shift + kDigitBits)) == 0)  // in the chosen bins
          atomicAdd(&hist[(u >> shift) & (kBins - 1)][lane], 1u);
      }
      __syncthreads();
      for (int b = warp; b < kBins; b += kSelectWarps) {
        const unsigned c = __reduce_add_sync(kFullMask, hist[b][lane]);
        if (lane == 0) bin_count[b] = c;
      }
      __syncthreads();
      if (warp == 0) {  // lane owns bins [8 lane, 8 lane + 8); the bin holding rank `need`
        constexpr int per = kBins / kWarp;
        unsigned mine[per], sum = 0;
#pragma unroll
        for (int i = 0; i < per; ++i) sum += mine[i] = bin_count[per * lane + i];
        unsigned incl = sum;
        for (int o = 1; o < kWarp; o <<= 1) {
          const unsigned x = __shfl_up_sync(kFullMask, incl, o);
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


// Rows of more than max_keys visible keys are the radix kernel's (skipped here). Grid x:
// tiles of kRankThreads keys (block 0 also writes the -1 slots), y: rows. The row's order
// keys go to shared memory; thread j's rank is the count of keys before it in the order:
// i < j with key_i <= key_j (a tie goes to the smaller key index) and i > j with key_i <
// key_j. Integer counts: exact, and a rank is the slot the radix kernel's sort gives it.
__global__ void __launch_bounds__(kRankThreads)
indexer_rank_kernel(const float* scores, int rows, int64_t n_max, const int32_t* n_visible, int64_t max_keys,
                    int width, int index_base, int32_t* idx, int idx_stride, int col0) {
  pdl_wait();
  pdl_launch_dependents();
  __shared__ __align__(16) uint32_t keys[kRankMaxKeys + 4];
  const int lane = threadIdx.x % kWarp;
  const int64_t j0 = int64_t{blockIdx.x} * kRankThreads;
  const int64_t w0 = j0 + threadIdx.x - lane;  // the warp's first key: a multiple of 32
  for (int t = blockIdx.y; t < rows; t += gridDim.y) {
    const int64_t n = visible_keys(n_visible, t, n_max);
    if (n > max_keys) continue;  // uniform per block
    const int keep = static_cast<int>(n < width ? n : width);
    int32_t* out = idx + static_cast<int64_t>(t) * idx_stride + col0;
    if (blockIdx.x == 0)
      for (int slot = keep + threadIdx.x; slot < width; slot += blockDim.x) out[slot] = -1;
    if (j0 >= n) continue;
    __syncthreads();  // the previous row's keys are read
    const float* st = scores + static_cast<int64_t>(t) * n_max;
    const int64_t padded = (n + 3) / 4 * 4;
    for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) keys[i] = i < n ? order_key(st[i]) : kAfterAll;
    __syncthreads();
    const int64_t j = j0 + threadIdx.x;
    if (w0 >= n) continue;  // uniform per warp
    const uint32_t u = j < n ? keys[j] : 0;
    const uint4* k4 = reinterpret_cast<const uint4*>(keys);
    int rank = 0;
    for (int64_t i = 0; i < w0 / 4; ++i) {  // every key before the warp's: before j
      const uint4 v = k4[i];
      rank += (v.x <= u) + (v.y <= u) + (v.z <= u) + (v.w <= u);
    }
    const int64_t w_end = w0 + kWarp < n ? w0 + kWarp : n;
    for (int64_t i = w0; i < w_end; ++i) rank += keys[i] < u || (keys[i] == u && i < j);
    for (int64_t i = w_end / 4 * 4 == w_end ? w_end / 4 : w_end / 4 + 1; i < padded / 4; ++i) {
      const uint4 v = k4[i];  // every key after the warp's (the pads never count)
      rank += (v.x < u) + (v.y < u) + (v.z < u) + (v.w < u);
    }
    if (j < n && rank < keep) out[rank] = index_base + static_cast<int32_t>(j);
  }
}

}  // namespace

void indexer_select(IndexerSelect kernel, const float* scores, int rows, int64_t n_max, const int32_t* n_visible,
                    int width, int index_base, int32_t* idx, int idx_stride, int col0, cudaStream_t stream) {
  if (width > kSelectMaxWidth)
    throw Error(cat("indexer_select: width ", width, " exceeds the CUDA top-k limit of ", kSelectMaxWidth));
  if (kernel == IndexerSelect::rank && n_max > kRankMaxKeys)
    throw Error(cat("indexer_select: the rank kernel takes rows of at most ", kRankMaxKeys, " keys, not ", n_max));
  if (rows == 0 || width == 0) return;
  if (kernel != IndexerSelect::radix) {
    const int64_t tiles = std::max<int64_t>(1, (std::min(n_max, kRankMaxKeys) + kRankThreads - 1) / kRankThreads);
    launch(indexer_rank_kernel, dim3(static_cast<unsigned>(tiles), grid_rows(rows)), kRankThreads, 0, stream, scores,
           rows, n_max, n_visible, kRankMaxKeys, width, index_base, idx, idx_stride, col0);
  }
  if (kernel != IndexerSelect::rank && (kernel == IndexerSelect::radix || n_max > kRankMaxKeys)) {
    const unsigned blocks = static_cast<unsigned>(rows > 65535 ? 65535 : rows);
    launch(indexer_radix_kernel, blocks, kSelectThreads, 0, stream, scores, rows, n_max, n_visible,
           kernel == IndexerSelect::radix ? int64_t{-1} : kRankMaxKeys, width, index_base, idx, idx_stride, col0);
  }
}

}  // namespace dsv4::cuda
