// The GEMV kernel family of MODEL.md §3.3 (L-bf16 and L-island, serving arm: f32
// accumulation), built to stream each weight once at the memory bandwidth (issue 12).
//
// FP8 weights of 8 MiB and more (wq_b, wo_a, wo_b, the shared expert, the indexer's wq_b)
// take the tensor-core arithmetic (gemv_tc.cuh: 16 weight rows x up to 8 rows per mma tile,
// so 1..8 rows cost about what one row costs), from kTcRingMinRows rows streamed through the
// cp.async ring (gemv_tc_ring.cuh, launch_gemv_tc_ring_auto: S - 1 k-block items in flight
// per warp in shared memory instead of one in registers; bitwise gemv_tc's, which the twin
// test and dsv4-dev-gemv check; gemv_kernel.h says why not below); the rest take the
// CUDA-core path:
//
// Fast path (weight rows of whole 16-byte chunks, x rows 16-byte aligned): a set of
// `splits` warps computes NO adjacent outputs n for up to R rows at once. Virtual lane
// v = split * 32 + lane reads chunks v, v + 32*splits, ... of each of its NO weight rows
// (16 FP8 codes, 8 BF16 or 4 F32 values per 128-bit load), U chunks ahead so U*NO loads are
// in flight per lane; each chunk is decoded once (FP8 by the hardware e4m3x2 -> f16x2
// conversion, exact) and used for all R rows, so a verify round of R rows reads the weight
// once. Per (row, output) and chunk the lane sums the two halves of the chunk in two chains
// (ascending k, fmaf) on the unscaled values, adds them and accumulates (lo + hi) * scale
// over its chunks in ascending k (the FP8 block scale is a power of two, so scaling the
// chunk's sum equals summing scaled products); the lanes combine by a fixed butterfly and
// the splits in ascending order. Two kernels run that arithmetic: the chunk kernel (one
// output set per warp set; weights under 8 MiB, where one wave of short-lived blocks wins)
// and the persistent kernel (resident blocks walk the output sets and load the next chunk
// group before using the current one; BF16 / F32 weights of 8 MiB and more, every row count).
// `splits` is chosen from the weight's shape and the device alone (enough warps to fill
// it), the kernel from the shape and the row count, and the per-row arithmetic depends on
// neither R nor the other rows, so a row of a T-row call is bit-identical to the same row
// alone (SPECDECODE.md §6.3 R-I3).
// Fallback (any layout): one warp per output, lane l sums k = l, l+32, ... ascending.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemv_args.cuh"
#include "kernels/cuda/gemv_kernel.h"
#include "kernels/cuda/gemv_tc.cuh"
#include "kernels/cuda/gemv_tc_ring.cuh"
#include "kernels/cuda/launch.cuh"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace dsv4 {
namespace cuda {

constexpr int kGemvOutputs = 2;  // NO: outputs per warp set (x chunks reused NO times)
constexpr int kGemvAhead = 2;    // U: chunks in flight per weight row and lane (dsv4-dev-gemv)
constexpr int kGemvRows = 8;     // R of the multi-row instantiation (verify rounds)
// The persistent kernel (gemv_persist_kernel): outputs per warp set, chunks ahead and
// resident blocks per SM by weight size, one row (launch_gemv_persist_rows for more;
// dsv4-dev-gemv on an H200, every variant bitwise equal): from 32 MiB NO 8 (2.08-2.19 TB/s
// on the 33.6 MB Flash matrices; the chunk kernel 1.39-1.51), from 8 MiB NO 4 (1.22 against
// 1.01), below it the chunk kernel (the 2-4 MB matrices are one wave, where fewer outputs
// per warp set win).
constexpr int kPersistAhead = 1, kPersistBlocks = 2;
constexpr int kPersistOutputs = 4, kPersistWideOutputs = 8;
constexpr int64_t kPersistMinChunks = int64_t{1} << 19;   // 8 MiB of 16-byte chunks
constexpr int64_t kPersistWideChunks = int64_t{1} << 21;  // 32 MiB

// ---- fallback ----

template <class W>
__global__ void gemv_kernel(W w, GemvArgs a) {
  pdl_wait();
  pdl_launch_dependents();
  const int lane = threadIdx.x % kWarp;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
  if (n >= a.n_out) return;  // whole warps exit together
  const int64_t g = blockIdx.z;
  for (int r = blockIdx.y; r < a.rows; r += gridDim.y) {
    const float* xr = a.x + r * a.x_stride + g * a.x_group;
    float acc = 0.0f;
    for (int64_t k = lane; k < a.k_in; k += kWarp) {
      const float v = a.act_bf16 ? bf16_round(xr[k]) : xr[k];
      acc = fmaf(v, w.at(a.w_row0 + g * a.w_group + n, k), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) a.y[r * a.y_stride + g * a.y_group + n] = acc;
  }
}

// ---- 16-byte chunk decoders: chunk (r, c0) holds W(r, c0 .. c0 + kVec) ----

struct Fp8Chunks {  // §3.4: e4m3(code) * e8m0(block scale); a chunk lies in one 128-block
  static constexpr int kVec = 16;
  Fp8W w;
  __device__ uint4 raw(int64_t r, int64_t c0) const { return load_chunk(w.codes + r * w.cols + c0); }
  __device__ float scale(int64_t r, int64_t c0) const {
    return e8m0_to_f32(__ldg(w.scales + (r >> 7) * w.scale_cols + (c0 >> 7)));
  }
  __device__ void decode(const uint4& q, float (&f)[kVec]) const {  // unscaled e4m3 values
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) {  // two codes per conversion, low byte first
      const auto pair = static_cast<__nv_fp8x2_storage_t>(words[i / 2] >> (16 * (i % 2)));
      const float2 v = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
      f[2 * i] = v.x;
      f[2 * i + 1] = v.y;
    }
  }
};
struct Bf16Chunks {
  static constexpr int kVec = 8;
  const uint16_t* p;
  int64_t cols;
  __device__ uint4 raw(int64_t r, int64_t c0) const { return load_chunk(p + r * cols + c0); }
  __device__ float scale(int64_t, int64_t) const { return 1.0f; }
  __device__ void decode(const uint4& q, float (&f)[kVec]) const {
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < kVec; ++i) f[i] = bf16_to_f32(static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2))));
  }
};
struct F32Chunks {
  static constexpr int kVec = 4;
  const float* p;
  int64_t cols;
  __device__ uint4 raw(int64_t r, int64_t c0) const { return load_chunk(p + r * cols + c0); }
  __device__ float scale(int64_t, int64_t) const { return 1.0f; }
  __device__ void decode(const uint4& q, float (&f)[kVec]) const {
    f[0] = __uint_as_float(q.x);
    f[1] = __uint_as_float(q.y);
    f[2] = __uint_as_float(q.z);
    f[3] = __uint_as_float(q.w);
  }
};

// ---- fast path ----

// The end of an output set: each (row, output) sum of the lanes by the fixed butterfly, then
// split 0 adds the splits' sums in ascending order and stores y. Every warp of the block
// calls it (it holds a __syncthreads).
template <int R, int NO>
__device__ inline void combine_set(const float (&acc)[R][NO], float (&part)[kGemvWarps][R][NO], int warp,
                                   int lane, int split, int splits, int r0, int nr, int64_t n0, int64_t g,
                                   const GemvArgs& a) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int o = 0; o < NO; ++o) {
      const float v = warp_sum(acc[r][o]);
      if (lane == 0) part[warp][r][o] = v;
    }
  __syncthreads();
  if (split == 0 && lane < R * NO) {
    const int r = lane / NO, o = lane % NO;
    if (r < nr && n0 + o < a.n_out) {
      float s = part[warp][r][o];
      for (int j = 1; j < splits; ++j) s += part[warp + j][r][o];
      a.y[(r0 + r) * a.y_stride + g * a.y_group + n0 + o] = s;
    }
  }
}

// x[0 .. kVec) by 128-bit loads (16-byte aligned), bf16-rounded when act_bf16 (L-bf16).
template <int kVec>
__device__ inline void load_x(const float* x, bool act_bf16, float (&xs)[kVec]) {
#pragma unroll
  for (int i = 0; i < kVec; i += 4) {
    const float4 v = *reinterpret_cast<const float4*>(x + i);
    xs[i] = v.x;
    xs[i + 1] = v.y;
    xs[i + 2] = v.z;
    xs[i + 3] = v.w;
  }
  if (act_bf16)
#pragma unroll
    for (int i = 0; i < kVec; ++i) xs[i] = bf16_round(xs[i]);
}

template <class C, int R, int NO, int U, int MinBlocks = 1>
__global__ void __launch_bounds__(kGemvThreads, MinBlocks) gemv_chunk_kernel(C w, GemvArgs a) {
  constexpr int kVec = C::kVec;
  __shared__ float part[kGemvWarps][R][NO];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int splits = a.splits, sets = kGemvWarps / splits;
  const int set = warp / splits, split = warp % splits;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * sets + set) * NO;
  const int64_t g = blockIdx.z;
  const int r0 = blockIdx.y * R;
  const int nr = a.rows - r0 < R ? a.rows - r0 : R;
  const float* x = a.x + r0 * a.x_stride + g * a.x_group;
  const int64_t wrow = a.w_row0 + g * a.w_group + n0;
  const int64_t chunks = a.k_in / kVec;
  const int64_t stride = int64_t{kWarp} * splits;
  bool live[NO];
#pragma unroll
  for (int o = 0; o < NO; ++o) live[o] = n0 + o < a.n_out;
  float acc[R][NO];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int o = 0; o < NO; ++o) acc[r][o] = 0.0f;

  const int64_t first = split * kWarp + lane;
  uint4 raw[U][NO];
  auto load = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int o = 0; o < NO; ++o)
        if (live[o] && base + u * stride < chunks) raw[u][o] = w.raw(wrow + o, (base + u * stride) * kVec);
  };
  load(first);  // weights only: in flight before the wait (launch.cuh)
  pdl_wait();
  pdl_launch_dependents();
  for (int64_t base = first; base < chunks; base += stride * U) {
    if (base != first) load(base);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c0 = (base + u * stride) * kVec;
      if (base + u * stride >= chunks) break;
      float wv[NO][kVec], ws[NO];
#pragma unroll
      for (int o = 0; o < NO; ++o)
        if (live[o]) {
          w.decode(raw[u][o], wv[o]);
          ws[o] = w.scale(wrow + o, c0);
        }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= nr) break;
        float xs[kVec];
        load_x(x + r * a.x_stride + c0, a.act_bf16, xs);
#pragma unroll
        for (int o = 0; o < NO; ++o) {
          float lo = 0.0f, hi = 0.0f;  // two independent chains per chunk
#pragma unroll
          for (int i = 0; i < kVec / 2; ++i) {
            lo = fmaf(xs[i], wv[o][i], lo);
            hi = fmaf(xs[kVec / 2 + i], wv[o][kVec / 2 + i], hi);
          }
          acc[r][o] = fmaf(lo + hi, ws[o], acc[r][o]);
        }
      }
    }
  }
  combine_set<R, NO>(acc, part, warp, lane, split, splits, r0, nr, n0, g, a);
}

// Persistent, up to R rows (issue 12: the chunk kernel loads only between its decode,
// butterfly and split combine, 1.3-1.5 TB/s): a grid of resident blocks walks the output
// sets, and a lane loads its next chunk group — of the same set or of the set it takes
// next — before it uses the current one; the block's R rows (r0 = blockIdx.y * R) share
// each weight load. A (row, output)'s arithmetic and combine order are the chunk kernel's,
// so the bits are the same for every R, NO and U (dsv4-dev-gemv checks it) and R-I3 holds.
template <class C, int R, int NO, int U, int MinBlocks>
__global__ void __launch_bounds__(kGemvThreads, MinBlocks) gemv_persist_kernel(C w, GemvArgs a) {
  static_assert(R * NO <= kWarp, "the combine takes one (row, output) per lane");
  constexpr int kVec = C::kVec;
  __shared__ float part[kGemvWarps][R][NO];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int splits = a.splits, sets = kGemvWarps / splits;
  const int set = warp / splits, split = warp % splits;
  const int64_t total = (a.n_out + NO - 1) / NO, step = int64_t{gridDim.x} * sets;
  const int64_t chunks = a.k_in / kVec, stride = int64_t{kWarp} * splits, first = split * kWarp + lane;
  const int64_t g = blockIdx.z;
  const int r0 = blockIdx.y * R;
  const int nr = R == 1 ? 1 : (a.rows - r0 < R ? a.rows - r0 : R);  // R = 1: rows == 1
  const float* x = a.x + r0 * a.x_stride + g * a.x_group;
  const int64_t wrow = a.w_row0 + g * a.w_group;  // + the output
  uint4 next[U][NO];
  auto load = [&](int64_t n0, int64_t base) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int o = 0; o < NO; ++o)
        if (n0 + o < a.n_out && base + u * stride < chunks)
          next[u][o] = w.raw(wrow + n0 + o, (base + u * stride) * kVec);
  };
  int64_t sb = int64_t{blockIdx.x} * sets;
  load((sb + set) * NO, first);  // weights only: in flight before the wait (launch.cuh)
  pdl_wait();
  pdl_launch_dependents();
  for (; sb < total; sb += step) {  // block-uniform
    const int64_t n0 = (sb + set) * NO;
    float acc[R][NO];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int o = 0; o < NO; ++o) acc[r][o] = 0.0f;
    for (int64_t base = first; base < chunks; base += stride * U) {
      uint4 raw[U][NO];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int o = 0; o < NO; ++o) raw[u][o] = next[u][o];
      if (base + stride * U < chunks) load(n0, base + stride * U);
      else load(n0 + step * NO, first);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c0 = (base + u * stride) * kVec;
        if (base + u * stride >= chunks) break;
        float xs[R][kVec];
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (r < nr) load_x(x + r * a.x_stride + c0, a.act_bf16, xs[r]);
#pragma unroll
        for (int o = 0; o < NO; ++o) {
          if (n0 + o >= a.n_out) continue;
          float wv[kVec];
          w.decode(raw[u][o], wv);
          const float ws = w.scale(wrow + n0 + o, c0);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (r >= nr) break;
            float lo = 0.0f, hi = 0.0f;
#pragma unroll
            for (int i = 0; i < kVec / 2; ++i) {
              lo = fmaf(xs[r][i], wv[i], lo);
              hi = fmaf(xs[r][kVec / 2 + i], wv[kVec / 2 + i], hi);
            }
            acc[r][o] = fmaf(lo + hi, ws, acc[r][o]);
          }
        }
      }
    }
    combine_set<R, NO>(acc, part, warp, lane, split, splits, r0, nr, n0, g, a);
    __syncthreads();  // part is read before the next set writes it
  }
}

// The fast-path decoder of a weight, when its layout allows one (else false).
inline bool chunks_of(const Fp8W& w, Fp8Chunks& c) {
  c.w = w;
  return aligned16(w.codes) && w.cols % Fp8Chunks::kVec == 0;
}
inline bool chunks_of(const DenseW& w, Bf16Chunks& c) {
  c.p = static_cast<const uint16_t*>(w.p);
  c.cols = w.cols;
  return w.bf16 && aligned16(w.p) && w.cols % Bf16Chunks::kVec == 0;
}
inline bool chunks_of(const DenseW& w, F32Chunks& c) {
  c.p = static_cast<const float*>(w.p);
  c.cols = w.cols;
  return !w.bf16 && aligned16(w.p) && w.cols % F32Chunks::kVec == 0;
}

// Warps per output set for a weight of `outputs` rows (all groups) and `chunks` 16-byte
// chunks per row: double while the machine (sm_count SMs x 32 warps) is not filled and
// every lane keeps at least two chunks. A function of the shape and the device only, never
// of the row count (R-I3).
inline int gemv_splits(int64_t outputs, int64_t chunks, int sm_count) {
  const int64_t fill_warps = int64_t{sm_count} * 32;
  int s = 1;
  while (s < kGemvWarps && (outputs + kGemvOutputs - 1) / kGemvOutputs * s < fill_warps &&
         chunks >= int64_t{2} * kWarp * (2 * s))
    s *= 2;
  return s;
}

// The persistent kernel with a.splits set, R rows a block (grid.y the row blocks): as many
// blocks as are resident at once on a device of `sm_count` multiprocessors, at most one per
// output-set group.
template <class C, int R, int NO, int U = kPersistAhead, int MinBlocks = kPersistBlocks>
void launch_gemv_persist(const C& c, const GemvArgs& a, int groups, int sm_count, cudaStream_t stream) {
  static const int per_sm = [] {
    int n = 0;
    DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &n, gemv_persist_kernel<C, R, NO, U, MinBlocks>, kGemvThreads, 0));
    return n;
  }();
  const dim3 grid = resident_gemv_grid(a, (a.n_out + NO - 1) / NO, R, groups, sm_count, per_sm);
  cuda::launch(gemv_persist_kernel<C, R, NO, U, MinBlocks>, grid, kGemvThreads, 0, stream, c, a);
}

// The persistent kernel for rows >= 1 on a weight of `chunks` chunks (>= kPersistMinChunks):
// R the smallest of 1, 2, 4, 8 holding the rows (row blocks of 8 beyond), NO by weight size
// and R (dsv4-dev-gemv on an H200, 33.6 MB matrices: 2 rows 24-26 us with R 2 x NO 4, 4 rows
// 39 us with R 4 x NO 8, 8 rows 87-99 us with R 8 x NO 4; the chunk kernel 43-49, 62-67,
// 104-132). Every choice computes a row alike (R-I3).
template <class C>
void launch_gemv_persist_rows(const C& c, const GemvArgs& a, int groups, int64_t chunks, int sm_count,
                              cudaStream_t stream) {
  const bool wide = chunks >= kPersistWideChunks;
  if (a.rows == 1) {
    if (wide) launch_gemv_persist<C, 1, kPersistWideOutputs>(c, a, groups, sm_count, stream);
    else launch_gemv_persist<C, 1, kPersistOutputs>(c, a, groups, sm_count, stream);
  } else if (a.rows == 2) {
    launch_gemv_persist<C, 2, kPersistOutputs>(c, a, groups, sm_count, stream);
  } else if (a.rows <= 4) {
    launch_gemv_persist<C, 4, kPersistWideOutputs, kPersistAhead, 1>(c, a, groups, sm_count, stream);
  } else {
    launch_gemv_persist<C, 8, kPersistOutputs, kPersistAhead, 1>(c, a, groups, sm_count, stream);
  }
}

// Launches the fast path with a.splits already set; R = 1 for one row, kGemvRows otherwise.
template <class C, int NO = kGemvOutputs, int U = kGemvAhead, int MinBlocks = 1>
void launch_gemv_chunks(const C& c, const GemvArgs& a, int groups, cudaStream_t stream) {
  const int64_t sets = (a.n_out + NO - 1) / NO, per_block = kGemvWarps / a.splits;
  const unsigned gx = static_cast<unsigned>((sets + per_block - 1) / per_block);
  if (a.rows == 1) {
    cuda::launch(gemv_chunk_kernel<C, 1, NO, U, MinBlocks>, dim3(gx, 1, groups), kGemvThreads, 0, stream, c, a);
  } else {
    const unsigned gy = static_cast<unsigned>((a.rows + kGemvRows - 1) / kGemvRows);
    cuda::launch(gemv_chunk_kernel<C, kGemvRows, NO, U, MinBlocks>, dim3(gx, gy, groups), kGemvThreads, 0, stream, c,
                 a);
  }
}

}  // namespace cuda

template <class C>
bool CudaOps::gemv_chunks(const C& c, cuda::GemvArgs a, int groups) {
  // x rows: 16-byte aligned starts (float4 loads); k_in whole chunks of the weight row.
  if (a.k_in % C::kVec != 0 || !cuda::aligned16(a.x) || a.x_stride % 4 != 0 || a.x_group % 4 != 0)
    return false;
  a.splits = cuda::gemv_splits(a.n_out * groups, a.k_in / C::kVec, sm_count_);
  // The kernel is chosen by the shape and the row count; both compute a row alike (R-I3).
  const int64_t chunks = a.n_out * groups * (a.k_in / C::kVec);
  if (chunks >= cuda::kPersistMinChunks)
    cuda::launch_gemv_persist_rows(c, a, groups, chunks, sm_count_, stream_);
  else
    cuda::launch_gemv_chunks(c, a, groups, stream_);
  return true;
}

// The tensor-core GEMV `kernel` on an FP8 problem (P exact bf16 planes of x: 1 for bf16
// activations, 3 for f32).
template <int P>
void launch_tc_gemv(cuda::TcGemvKernel kernel, const cuda::TcFp8Run& run, const cuda::GemvArgs& a, int groups,
                    int sm_count, cudaStream_t stream) {
  const bool ring = kernel == cuda::TcGemvKernel::ring ||
                    (kernel == cuda::TcGemvKernel::automatic && a.rows >= cuda::kTcRingMinRows);
  if (ring) cuda::launch_gemv_tc_ring_auto<cuda::TcFp8Run, P>(run, a, groups, sm_count, stream);
  else cuda::launch_gemv_tc_auto<cuda::TcFp8Run, P>(run, a, groups, sm_count, stream);
}

template <class W>
void CudaOps::gemv(const W& w, const cuda::GemvArgs& a, int groups, cuda::TcGemvKernel tc) {
  if (a.rows == 0 || a.n_out == 0 || groups == 0) return;
  activate();
  if constexpr (std::is_same_v<W, cuda::Fp8W>) {
    // Weights of 8 MiB and more on the tensor cores (a function of the shape: R-I3).
    if (cuda::tc_layout(w, a) && a.n_out * groups * a.k_in >= cuda::kTcMinBytes) {
      const cuda::TcFp8Run run{w};
      if (a.act_bf16) launch_tc_gemv<1>(tc, run, a, groups, sm_count_, stream_);
      else launch_tc_gemv<3>(tc, run, a, groups, sm_count_, stream_);
      return;
    }
    cuda::Fp8Chunks c;
    if (cuda::chunks_of(w, c) && gemv_chunks(c, a, groups)) return;
  } else if constexpr (std::is_same_v<W, cuda::DenseW>) {
    cuda::Bf16Chunks b;
    cuda::F32Chunks f;
    if (cuda::chunks_of(w, b) && gemv_chunks(b, a, groups)) return;
    if (cuda::chunks_of(w, f) && gemv_chunks(f, a, groups)) return;
  }
  const dim3 grid(static_cast<unsigned>((a.n_out + cuda::kGemvWarps - 1) / cuda::kGemvWarps),
                  cuda::grid_rows(a.rows), static_cast<unsigned>(groups));
  cuda::launch(cuda::gemv_kernel<W>, grid, cuda::kGemvThreads, 0, stream_, w, a);
}

// y [rows, n_out] = x [rows, k_in] W^T (one group, contiguous rows).
template <class W>
void CudaOps::gemv_rows(const W& w, const float* x, int64_t k_in, bool act_bf16, float* y,
                        int64_t n_out, int rows, cuda::TcGemvKernel tc) {
  cuda::GemvArgs a;
  a.x = x;
  a.x_stride = k_in;
  a.y = y;
  a.y_stride = n_out;
  a.k_in = k_in;
  a.n_out = n_out;
  a.rows = rows;
  a.act_bf16 = act_bf16;
  gemv(w, a, 1, tc);
}

}  // namespace dsv4
