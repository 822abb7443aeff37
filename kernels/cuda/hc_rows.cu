// The row-tiled hyper-connection kernels for a prefill's many rows (issue 13; MODEL.md §4.4
// steps 1-3, §4.25 steps 1-3), bit for bit the shipped kernels of hc.cu.
//
// Mix partials: the shipped kernel gives one warp one (row, mix, slice) at a time: lane l
// sums the f64 products of columns l, l+32, l+64, l+96 of the slice (ascending), then a
// butterfly (xor 16, 8, 4, 2, 1) adds the 32 lane partials: ~45 warp instructions (ten
// shuffles and ten moves for them, four f32 -> f64 conversions, four multiplies, nine adds)
// per 128 multiply-adds. Here one thread computes a whole (row, mix, slice) partial: the
// same 32 lane partials in the same order, added along the butterfly's tree walked depth
// first (ButterflyWalk), with no shuffles: ~8 warp instructions a partial. A block
// stages one slice of fn (24 mixes) and of a 64-row tile of h in shared memory as f64
// (converted once), and each of its 256 threads owns 2 rows x 3 mixes (6 partials: 10
// 16-byte shared loads feed 24 f64 FMAs); a ninth warp takes the tile's sums of squares.
// HcKernels::row_quads: 128 threads of 4 rows x 3 mixes (MixRows).
// Collapse: one 256-thread block per row (not four 1024-thread blocks each combining the
// same five mixes).
#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/hc_device.cuh"
#include "kernels/cuda/hc_rows.cuh"

namespace dsv4::cuda::hc {

namespace {

constexpr int kTileRows = 64;                              // rows of h a block stages
constexpr int kPairs = kTileRows / 2;                      // a squares thread's rows: p and p + kPairs
constexpr int kMixesPerThread = 3;
constexpr int kGroups = 8;                                 // mix threads per row group
constexpr int kBlockMixes = kGroups * kMixesPerThread;     // fn rows a block stages (grid.z: more)

// A mix thread's rows: kRowsPer of the tile, p + kRowGroups r. 2 (HcKernels::row_tiled):
// 256 mix threads. 4 (row_quads): 128, each fn load feeding twice the f64 FMAs (10 -> 14
// 16-byte shared loads for 24 -> 48 FMAs; at four wavefronts a warp's load, the count puts
// row_tiled's mix at ~84 us of shared-memory cycles of its ~116 at 1,024 Flash rows).
// The last warp takes the tile's sums of squares, 2 rows a thread, either way.
template <int kRowsPer>
struct MixRows {
  static constexpr int kRowGroups = kTileRows / kRowsPer;
  static constexpr int kMixThreads = kGroups * kRowGroups;  // thread g + 8 p
  static constexpr int kThreads = kMixThreads + kWarp;
};
constexpr int kStride = kSlice + 2;  // doubles a staged row: 16 B of pad so the rows a load
                                     // instruction reads fall in distinct banks
constexpr size_t kMixSmem = sizeof(double) * (kBlockMixes + kTileRows) * kStride;
constexpr int kLevels = 5;  // log2(kWarp): the butterfly's levels

// Lane position l's columns of a slice (l + 32 i, i ascending) are staged contiguously at
// l * kPerLane + i, so a thread reads them with two 16-byte loads.
static_assert(kPerLane == 4 && kSlice == kWarp * kPerLane, "the staged layout holds 4 columns a lane");

__host__ __device__ constexpr int bitrev5(int n) {
  return ((n & 1) << 4) | ((n & 2) << 2) | (n & 4) | ((n & 8) >> 2) | ((n & 16) >> 4);
}

// The shipped warp_sum of 32 lane partials, on one thread. The butterfly's lane 0 ends with
// node(5, 0), where node(0, l) = partial l and node(k, x) = node(k-1, x) + node(k-1, x + 2^(5-k)):
// leaves in depth-first order are lane positions bitrev5(n), n = 0..31, and before leaf n
// the pending left children are one per set bit of n (a binary counter). Every node is the same
// two operands added (f64 addition commutes), so the root equals the butterfly's bits.
struct ButterflyWalk {
  double pending[kLevels];
  // Leaf n's partial in; at n = 31 the root out.
  __device__ double push(int n, double v) {
    int level = 0;
#pragma unroll
    for (; level < kLevels && (n >> level & 1); ++level) v = pending[level] + v;
    if (level < kLevels) pending[level] = v;
    return v;
  }
};

// A lane position's partial: sum_i x[i] w[i] from 0.0, i ascending, as the shipped p += x * w.
// The products of f32 values are exact in f64, so each fma rounds as the shipped add does.
__device__ inline double lane_partial(const double2 (&x)[2], const double2 (&w)[2]) {
  double p = 0.0;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    p = fma(x[i].x, w[i].x, p);
    p = fma(x[i].y, w[i].y, p);
  }
  return p;
}

__device__ inline void load_lane(const double* row, int l, double2 (&v)[2]) {
  const double2* p = reinterpret_cast<const double2*>(row + l * kPerLane);
  v[0] = p[0];
  v[1] = p[1];
}

// dst[r * kStride + l * 4 + i] = value(r, column i * 32 + l) in f64 for r < kRows: warp w of
// kWarps stages rows w, w + kWarps, ..., lane l its columns l + 32 i (four 128-byte loads a
// row, two 16-byte stores: conflict-free). All of a thread's loads issue before its first
// store, so the whole tile is in flight at once (64 rows: 32 KB a block).
template <int kRows, int kWarps, class Value>
__device__ void stage_rows(double* dst, Value value) {
  constexpr int kPerWarp = (kRows + kWarps - 1) / kWarps;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  float v[kPerWarp][kPerLane];
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i)
#pragma unroll
    for (int c = 0; c < kPerLane; ++c)
      v[i][c] = warp + i * kWarps < kRows ? value(warp + i * kWarps, c * kWarp + lane) : 0.0f;
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) {
    if (warp + i * kWarps >= kRows) continue;
    double2* d = reinterpret_cast<double2*>(dst + (warp + i * kWarps) * kStride + lane * kPerLane);
    d[0] = make_double2(v[i][0], v[i][1]);
    d[1] = make_double2(v[i][2], v[i][3]);
  }
}

// Grid (slices, row tiles, ceil(m / 24)); block MixRows<kRowsPer>::kThreads. Writes the
// shipped hc_mix_partial_kernel's part[(t * (m+1) + j) * slices + s] (j = m: the sum of
// squares, by the z = 0 blocks' last warp). Each partial's operations and order are the same
// for either kRowsPer (which thread computes it is all that differs).
template <int kRowsPer>
__global__ void __launch_bounds__(MixRows<kRowsPer>::kThreads, 2)
hc_mix_rows_kernel(const float* h, int64_t rows, int64_t width, DenseW fn, int m, double* part) {
  using L = MixRows<kRowsPer>;
  constexpr int kWarps = L::kThreads / kWarp;
  extern __shared__ double2 smem[];  // 16-byte aligned
  double* ws = reinterpret_cast<double*>(smem);
  double* xs = ws + kBlockMixes * kStride;
  const int64_t slices = gridDim.x, s = blockIdx.x, k0 = s * kSlice;
  const int j0 = blockIdx.z * kBlockMixes;
  stage_rows<kBlockMixes, kWarps>(ws, [&](int r, int k) {
    return j0 + r < m && k0 + k < width ? fn.at((j0 + r) * width + k0 + k) : 0.0f;
  });
  const bool mixes = threadIdx.x < L::kMixThreads;  // warp-uniform
  const int g = threadIdx.x % kGroups, p = mixes ? threadIdx.x / kGroups : threadIdx.x - L::kMixThreads;
  for (int64_t t0 = int64_t{blockIdx.y} * kTileRows; t0 < rows; t0 += int64_t{gridDim.y} * kTileRows) {
    __syncthreads();  // the previous tile is read (the first time: fn is staged before it is read)
    stage_rows<kTileRows, kWarps>(xs, [&](int r, int k) {
      return t0 + r < rows && k0 + k < width ? h[(t0 + r) * width + k0 + k] : 0.0f;
    });
    __syncthreads();
    if (t0 + p >= rows) continue;  // no row of this thread's here (a decode row's tile); no collective below
    if (mixes) {
      const double* x_rows[kRowsPer];
      int64_t t[kRowsPer];
#pragma unroll
      for (int r = 0; r < kRowsPer; ++r) {
        x_rows[r] = xs + (p + r * L::kRowGroups) * kStride;
        t[r] = t0 + p + r * L::kRowGroups;
      }
      ButterflyWalk walk[kRowsPer][kMixesPerThread];
      double root[kRowsPer][kMixesPerThread];
#pragma unroll
      for (int n = 0; n < kWarp; ++n) {
        const int l = bitrev5(n);
        double2 x[kRowsPer][2];
#pragma unroll
        for (int r = 0; r < kRowsPer; ++r) load_lane(x_rows[r], l, x[r]);
#pragma unroll
        for (int q = 0; q < kMixesPerThread; ++q) {
          double2 w[2];
          load_lane(ws + (g * kMixesPerThread + q) * kStride, l, w);
#pragma unroll
          for (int r = 0; r < kRowsPer; ++r) root[r][q] = walk[r][q].push(n, lane_partial(x[r], w));
        }
      }
#pragma unroll
      for (int r = 0; r < kRowsPer; ++r)
#pragma unroll
        for (int q = 0; q < kMixesPerThread; ++q) {
          const int j = j0 + g * kMixesPerThread + q;
          if (t[r] < rows && j < m) part[(t[r] * (m + 1) + j) * slices + s] = root[r][q];
        }
    } else if (blockIdx.z == 0) {  // the sums of squares: block-uniform
      const double* x_rows[2] = {xs + p * kStride, xs + (p + kPairs) * kStride};
      const int64_t t[2] = {t0 + p, t0 + p + kPairs};
      ButterflyWalk walk[2];
      double root[2];
#pragma unroll
      for (int n = 0; n < kWarp; ++n) {
        const int l = bitrev5(n);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          double2 x[2];
          load_lane(x_rows[r], l, x);
          root[r] = walk[r].push(n, lane_partial(x, x));
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
        if (t[r] < rows) part[(t[r] * (m + 1) + m) * slices + s] = root[r];
    }
  }
}

constexpr int kCollapseThreads = 256;

// kVec consecutive floats, loaded / stored as one access (kVec 4: 16-byte aligned).
template <int kVec>
struct Floats {
  float v[kVec];
};
template <int kVec>
__device__ inline Floats<kVec> load_floats(const float* p) {
  Floats<kVec> f;
  if constexpr (kVec == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    f.v[0] = q.x, f.v[1] = q.y, f.v[2] = q.z, f.v[3] = q.w;
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) f.v[i] = p[i];
  }
  return f;
}
template <int kVec>
__device__ inline void store_floats(float* p, const Floats<kVec>& f) {
  if constexpr (kVec == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(f.v[0], f.v[1], f.v[2], f.v[3]);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) p[i] = f.v[i];
  }
}

// One row per block (rows strided over the grid): warps 0..hc combine the row's pre mixes
// and sum of squares (mix_sum, as the shipped hc_apply_kernel), then every thread takes
// the kVec columns from d = kVec (threadIdx.x + 256 i): each y element collapse_sum's, so
// kVec only changes the width of the accesses (issue 13: 16-byte ones when hidden % 4 == 0).
template <int kVec>
__global__ void __launch_bounds__(kCollapseThreads)
hc_collapse_rows_kernel(const float* h, const double* part, int64_t slices, int64_t rows, int hc, int hidden,
                        int m, double norm_eps, SplitArgs a, float* y) {
  __shared__ double raw[kMaxSums];
  __shared__ float pre[kMaxHc];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    __syncthreads();  // the previous row's raw / pre are read
    for (int q = warp; q < hc + 1; q += warps) {  // warp-uniform
      const int j = q < hc ? q : m;
      const double r = mix_sum(part, slices, t, m, j);
      if (lane == 0) raw[j] = r;
    }
    __syncthreads();
    if (threadIdx.x < hc) pre[threadIdx.x] = collapse_pre(raw, mix_rs(raw, m, hc, hidden, norm_eps), threadIdx.x, a);
    __syncthreads();
    const float* ht = h + t * hc * hidden;
#pragma unroll 1  // hc's kVec-wide loads in flight a thread; more cost occupancy (kMaxHc of them)
    for (int d = threadIdx.x * kVec; d < hidden; d += blockDim.x * kVec) {
      Floats<kVec> x[kMaxHc], out;
#pragma unroll
      for (int c = 0; c < kMaxHc; ++c)
        if (c < hc) x[c] = load_floats<kVec>(ht + int64_t{c} * hidden + d);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        float xc[kMaxHc];
#pragma unroll
        for (int c = 0; c < kMaxHc; ++c) xc[c] = c < hc ? x[c].v[i] : 0.0f;
        out.v[i] = collapse_sum(pre, xc, hc);
      }
      store_floats<kVec>(y + t * hidden + d, out);
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

constexpr int kPostThreads = 256;

// §4.5 for a prefill's rows: out[t,k,d] = post[t,k] x[t,d] + sum_j comb[t,j,k] res[t,j,d],
// j ascending, each element with hc.cu's hc_post_kernel's (the CPU's) operations; thread
// (columns d .. d + kVec, row t) of grid (column blocks, rows) makes the accesses kVec wide
// (issue 13: 16-byte ones; the shipped one-column threads ran at ~60% of the bytes' floor).
template <int kVec>
__global__ void __launch_bounds__(kPostThreads, 4)  // <= 64 registers: 4 blocks an SM
hc_post_rows_kernel(const float* x, const float* res, const float* post, const float* comb, int64_t rows, int hc,
                    int hidden, float* out) {
  const int d = (blockIdx.x * kPostThreads + threadIdx.x) * kVec;
  if (d >= hidden) return;
  for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    const float* ct = comb + t * hc * hc;  // comb[t, j, k] at ct[j * hc + k]
    Floats<kVec> r[kMaxHc];
#pragma unroll
    for (int j = 0; j < kMaxHc; ++j)
      if (j < hc) r[j] = load_floats<kVec>(res + (t * hc + j) * hidden + d);
    const Floats<kVec> xv = load_floats<kVec>(x + t * hidden + d);
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) {
      if (k >= hc) break;
      const float pk = post[t * hc + k];
      Floats<kVec> acc;
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc.v[i] = pk * xv.v[i];
#pragma unroll
      for (int j = 0; j < kMaxHc; ++j)
        if (j < hc) {
          const float cjk = ct[j * hc + k];
#pragma unroll
          for (int i = 0; i < kVec; ++i) acc.v[i] += cjk * r[j].v[i];
        }
      store_floats<kVec>(out + (t * hc + k) * hidden + d, acc);
    }
  }
}

template <int kRowsPer>
void launch_mix_rows_of(cudaStream_t stream, const dim3& grid, const float* h, int64_t rows, int64_t width,
                        const DenseW& fn, int m, double* part) {
  DSV4_CUDA_CHECK(cudaFuncSetAttribute(hc_mix_rows_kernel<kRowsPer>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kMixSmem)));
  hc_mix_rows_kernel<kRowsPer><<<grid, MixRows<kRowsPer>::kThreads, kMixSmem, stream>>>(h, rows, width, fn, m, part);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_mix_rows(cudaStream_t stream, const float* h, int64_t rows, int64_t width, const DenseW& fn, int m,
                     double* part, bool quads) {
  DSV4_CHECK(m >= 1 && m + 1 <= kMaxSums, "hc mix rows: m=", m);
  const dim3 grid(static_cast<unsigned>(slices_of(width)), grid_rows((rows + kTileRows - 1) / kTileRows),
                  static_cast<unsigned>((m + kBlockMixes - 1) / kBlockMixes));
  if (quads) launch_mix_rows_of<4>(stream, grid, h, rows, width, fn, m, part);
  else launch_mix_rows_of<2>(stream, grid, h, rows, width, fn, m, part);
}

void launch_collapse_rows(cudaStream_t stream, const float* h, const double* part, int64_t rows, int hc,
                          int hidden, int m, double norm_eps, const SplitArgs& a, float* y) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
  const int64_t slices = slices_of(int64_t{hc} * hidden);
  if (hidden % 4 == 0 && aligned16(h) && aligned16(y))
    hc_collapse_rows_kernel<4><<<blocks, kCollapseThreads, 0, stream>>>(h, part, slices, rows, hc, hidden, m,
                                                                         norm_eps, a, y);
  else
    hc_collapse_rows_kernel<1><<<blocks, kCollapseThreads, 0, stream>>>(h, part, slices, rows, hc, hidden, m,
                                                                         norm_eps, a, y);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4::cuda::hc

void dsv4::cuda::hc_post_rows(const float* x, const float* res, const float* post, const float* comb, int64_t rows,
                              int hc, int hidden, float* out, cudaStream_t stream) {
  using namespace hc;
  DSV4_CHECK(hc >= 1 && hc <= kMaxHc, "hc_post rows: hc=", hc);
  if (rows * hidden == 0) return;
  const bool wide = hidden % 4 == 0 && aligned16(x) && aligned16(res) && aligned16(out);
  const int vec = wide ? 4 : 1;
  const dim3 grid(static_cast<unsigned>((hidden + kPostThreads * vec - 1) / (kPostThreads * vec)), grid_rows(rows));
  if (wide)
    hc_post_rows_kernel<4><<<grid, kPostThreads, 0, stream>>>(x, res, post, comb, rows, hc, hidden, out);
  else
    hc_post_rows_kernel<1><<<grid, kPostThreads, 0, stream>>>(x, res, post, comb, rows, hc, hidden, out);
  DSV4_CUDA_LAUNCH_CHECK();
}
