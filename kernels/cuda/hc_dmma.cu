// hc_pre's mix partials on the f64 tensor cores for a prefill's many rows (issue 13;
// MODEL.md §4.4 step 1): cuda::HcKernels::dmma. Per 128-column slice s, the partials of an
// 8-row tile against 24 mixes are one 8 x 24 f64 GEMM, K = 128: three n8 tiles of
// mma.sync.m8n8k4.f64 (DMMA, sm_80+), each the 32 k4 steps chained in its accumulator
// from 0.0 in a fixed order. h and fn are f32 or bf16, so every product is exact in f64;
// only the f64 summation order differs from the shipped kernels' lane-strided sums and
// butterfly, so a partial may differ from theirs by a few f64 roundings (~1e-16 relative
// to the slice's |terms|): tolerance-bound (prefill, law 2), never bit-identical to a decode
// row's (hc_rows.cuh). A row's partials still depend on that row alone: element (g, n) of
// an mma's D is row g of A against column n of B plus C's (g, n), so which rows share the
// 8-row tile (a prefill's neighbours, zeros past the last row) cannot move its bits, and
// the step order is fixed by the slice, not the row count.
//
// The sum of squares is no GEMM with fn; the lane that holds an h value as an A fragment
// squares it on the CUDA cores (one DFMA per three DMMAs; a 25th "mix" would need the row
// itself as B, a second mma per tile), then the four lanes of its row add their sums
// ((l0 + l1) + (l2 + l3), the same on every lane).
//
// Layout: step k of the slice is (i, c) = (k / 4, k % 4), and lane (g, t) of the mma
// fragments (g = lane / 4, t = lane % 4; A[g][t], B[t][g]) takes column 16 i + 4 t + c:
// its A values for the 32 steps are 8 float4 loads of its row, straight from global (16-byte
// pieces, 64 contiguous bytes per row a load). A block (4 warps, 16 rows a warp: two m8
// tiles, each fn fragment feeding two DMMAs) stages its slice of fn once as f64 in those
// fragments' order (24 KB), two steps a lane as one 16-byte word, then walks its row tiles.
// dmma_pairs: two slices a block (48 KB), a warp taking both for its rows before it
// stores, so a (row, sum)'s two partials are one 16-byte store (the partials are 0.4x h's
// bytes, and one-slice blocks store them 8 bytes at a time: an L2 transaction each).
// Registers (nvcc -Xptxas -v, sm_90): 126 (dmma), 160 (pairs), no spills; the one-float
// loads' fallback 128 with 8 bytes of spill (widths % 4 != 0 only).
#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/hc_device.cuh"

namespace dsv4::cuda::hc {

namespace {

constexpr int kK = 4;                          // an mma's k
constexpr int kSteps = kSlice / kK;            // k4 steps chained a slice
constexpr int kChunks = kSlice / (4 * kK);     // float4 loads a lane a row: columns 16 i + 4 t
constexpr int kPairs = kSteps / 2;             // fn fragments staged two steps a word
constexpr int kN = 8;                          // an mma's n: mixes a tile
constexpr int kNTiles = 3;                     // n8 tiles a block: 24 mixes (grid.z: more)
constexpr int kBlockMixes = kN * kNTiles;
constexpr int kMTiles = 2;                     // m8 tiles a warp
constexpr int kWarpRows = 8 * kMTiles;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kTileRows = kWarps * kWarpRows;  // rows a block takes at a time
static_assert(kChunks * 4 * kK == kSlice && kSteps % 2 == 0, "a slice is 8 chunks of 16 columns");

// d += a b: one mma.m8n8k4 f64 (PTX ISA "Matrix Fragments for mma.m8n8k4 with .f64"): lane
// (g, t) holds A[g][t] (a), B[t][g] (b), D[g][2t], D[g][2t + 1] (d).
__device__ inline void dmma(double (&d)[2], double a, double b) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
      : "+d"(d[0]), "+d"(d[1])
      : "d"(a), "d"(b));
}

// fs[(q * kPairs + p) * 32 + lane] = fn's {step 2p, step 2p + 1} values of lane (g, t) of
// n8 tile q: mix j0 + 8q + g, columns of steps 2p, 2p + 1 (zeros past m or width).
__device__ void stage_fn(const DenseW& fn, int64_t width, int m, int j0, int64_t k0, double2* fs) {
  for (int e = threadIdx.x; e < kBlockMixes * kChunks * kK; e += kThreads) {  // e: (mix, chunk, t)
    const int t = e % kK, i = e / kK % kChunks, jj = e / (kK * kChunks), q = jj / kN, g = jj % kN;
    const int j = j0 + jj;
    float v[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t k = k0 + 16 * i + 4 * t + c;
      v[c] = j < m && k < width ? fn.at(j * width + k) : 0.0f;
    }
    const int lane = g * kK + t;
    fs[(q * kPairs + 2 * i) * kWarp + lane] = make_double2(v[0], v[1]);
    fs[(q * kPairs + 2 * i + 1) * kWarp + lane] = make_double2(v[2], v[3]);
  }
}

// Row `row`'s columns k0 + 16 i + 4 t + (0..3), i < kChunks (zeros past rows or width).
// kVec4: one 16-byte load a chunk (width % 4 == 0 and h 16-byte aligned: a chunk is all in or
// all out of the row).
template <bool kVec4>
__device__ inline void load_row(const float* h, int64_t rows, int64_t width, int64_t row, int64_t k0, int t,
                                float4 (&x)[kChunks]) {
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t k = k0 + 16 * i + 4 * t;
    const float* p = h + row * width + k;
    if constexpr (kVec4) {
      x[i] = row < rows && k < width ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0, 0, 0, 0);
    } else {
      float v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) v[c] = row < rows && k + c < width ? p[c] : 0.0f;
      x[i] = make_float4(v[0], v[1], v[2], v[3]);
    }
  }
}

__device__ inline float lane_of(const float4& v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; }

// One slice's partials of a warp's 16 rows (x: their A values) against the staged fn
// slice fs: acc[r][q] the D fragment of m8 tile r and n8 tile q, each the 32 k4 steps
// chained in ascending order; sq[r] the lane's sum of squares of its 32 values (squares).
__device__ inline void mix_slice(const float4 (&x)[kMTiles][kChunks], const double2* fs, int lane, bool squares,
                                 double (&acc)[kMTiles][kNTiles][2], double (&sq)[kMTiles]) {
#pragma unroll
  for (int p = 0; p < kPairs; ++p) {  // steps 2p, 2p + 1: chunk i = p / 2, components c
    double2 b[kNTiles];
#pragma unroll
    for (int q = 0; q < kNTiles; ++q) b[q] = fs[(q * kPairs + p) * kWarp + lane];
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
      const int c = 2 * (p % 2) + h2;
#pragma unroll
      for (int r = 0; r < kMTiles; ++r) {
        const double a = lane_of(x[r][p / 2], c);
        if (squares) sq[r] = fma(a, a, sq[r]);
#pragma unroll
        for (int q = 0; q < kNTiles; ++q) dmma(acc[r][q], a, h2 ? b[q].y : b[q].x);
      }
    }
  }
}

// kG consecutive partials of one sum from part + i (kG 2: one 16-byte store; i even).
template <int kG>
__device__ inline void store_run(double* part, int64_t i, const double (&v)[kG]) {
  if constexpr (kG == 2) *reinterpret_cast<double2*>(part + i) = make_double2(v[0], v[1]);
  else part[i] = v[0];
}

// Grid (slices / kG, row blocks, ceil(m / 24)); kThreads a block. Writes the shipped
// kernels' part[(t * (m+1) + j) * slices + s] (j = m: the sum of squares, by the z = 0
// blocks). kG slices a block, each warp taking them one after the other for its rows and
// keeping their partials, so each (row, sum) gets its kG partials in one store (2: 16
// bytes, half the stores' L2 transactions); every partial's operations and order are the
// same for either kG.
template <int kG, bool kVec4>
__global__ void __launch_bounds__(kThreads, kG == 1 ? 4 : 3)
hc_mix_dmma_kernel(const float* h, int64_t rows, int64_t width, int64_t slices, DenseW fn, int m, double* part) {
  __shared__ double2 fs[kG][kNTiles * kPairs * kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, g = lane / kK, t = lane % kK;
  const int64_t s0 = int64_t{blockIdx.x} * kG;
  const int j0 = blockIdx.z * kBlockMixes;
  const bool squares = blockIdx.z == 0;
#pragma unroll
  for (int u = 0; u < kG; ++u) stage_fn(fn, width, m, j0, (s0 + u) * kSlice, fs[u]);
  __syncthreads();
  for (int64_t t0 = int64_t{blockIdx.y} * kTileRows + warp * kWarpRows; t0 < rows;
       t0 += int64_t{gridDim.y} * kTileRows) {  // warp-uniform; no block collective below
    double acc[kG][kMTiles][kNTiles][2] = {}, sq[kG][kMTiles] = {};
#pragma unroll
    for (int u = 0; u < kG; ++u) {
      float4 x[kMTiles][kChunks];
#pragma unroll
      for (int r = 0; r < kMTiles; ++r) load_row<kVec4>(h, rows, width, t0 + 8 * r + g, (s0 + u) * kSlice, t, x[r]);
      mix_slice(x, fs[u], lane, squares, acc[u], sq[u]);
    }
#pragma unroll
    for (int r = 0; r < kMTiles; ++r) {
      const int64_t row = t0 + 8 * r + g;
#pragma unroll
      for (int q = 0; q < kNTiles; ++q)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = j0 + q * kN + 2 * t + e;
          double v[kG];
#pragma unroll
          for (int u = 0; u < kG; ++u) v[u] = acc[u][r][q][e];
          if (row < rows && j < m) store_run<kG>(part, (row * (m + 1) + j) * slices + s0, v);
        }
      if (squares) {  // block-uniform: the row's four lanes, (l0 + l1) + (l2 + l3)
        double v[kG];
#pragma unroll
        for (int u = 0; u < kG; ++u) {
          v[u] = sq[u][r];
          v[u] += __shfl_xor_sync(0xffffffffu, v[u], 1);
          v[u] += __shfl_xor_sync(0xffffffffu, v[u], 2);
        }
        if (t == 0 && row < rows) store_run<kG>(part, (row * (m + 1) + m) * slices + s0, v);
      }
    }
  }
}

// Grid.y: the row blocks a slice group, each walking its 64-row tiles; as many as the device
// holds at once beside the other groups (one wave: 128 slices x 4 at Flash's shapes on an
// H200, 4 blocks an SM; pairs 64 x 6 at 3), never more than the tiles. Which block takes
// a tile moves no bit.
template <int kG, bool kVec4>
void launch_of(cudaStream_t stream, int64_t slices, const float* h, int64_t rows, int64_t width, const DenseW& fn,
               int m, double* part) {
  static const int per_sm = [] {
    int n = 0;
    DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, hc_mix_dmma_kernel<kG, kVec4>, kThreads, 0));
    return std::max(n, 1);
  }();
  int device = 0, sms = 0;
  DSV4_CUDA_CHECK(cudaGetDevice(&device));
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t groups = slices / kG * ((m + kBlockMixes - 1) / kBlockMixes);
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  const int64_t row_blocks = std::clamp<int64_t>(int64_t{per_sm} * sms / groups, 1, std::min<int64_t>(tiles, 65535));
  const dim3 grid(static_cast<unsigned>(slices / kG), static_cast<unsigned>(row_blocks),
                  static_cast<unsigned>((m + kBlockMixes - 1) / kBlockMixes));
  hc_mix_dmma_kernel<kG, kVec4><<<grid, kThreads, 0, stream>>>(h, rows, width, slices, fn, m, part);
  DSV4_CUDA_LAUNCH_CHECK();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void launch_mix_dmma(cudaStream_t stream, const float* h, int64_t rows, int64_t width, const DenseW& fn, int m,
                     double* part, bool pairs) {
  DSV4_CHECK(m >= 1 && m + 1 <= kMaxSums, "hc mix dmma: m=", m);
  const int64_t slices = slices_of(width);
  const bool vec4 = width % 4 == 0 && aligned16(h);
  if (pairs && slices % 2 == 0 && aligned16(part)) {  // else the same bits a slice at a time
    if (vec4) return launch_of<2, true>(stream, slices, h, rows, width, fn, m, part);
    return launch_of<2, false>(stream, slices, h, rows, width, fn, m, part);
  }
  if (vec4) return launch_of<1, true>(stream, slices, h, rows, width, fn, m, part);
  launch_of<1, false>(stream, slices, h, rows, width, fn, m, part);
}

}  // namespace dsv4::cuda::hc
