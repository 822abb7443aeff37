// The GEMV kernel family of MODEL.md §3.3 (L-bf16 and L-island, serving arm: f32
// accumulation). One warp computes one output element of one row and a fixed butterfly
// combines the lanes. Fast path: lane l reads 16-byte chunks l, l+32, ... of the weight
// row (16 FP8 codes, 8 BF16 or 4 F32 values per 128-bit load), decodes them in registers
// and accumulates each chunk's products in ascending k; fallback (row stride or pointer
// not 16-byte aligned): lane l sums k = l, l+32, ... in ascending order. The launch shape
// and the path depend only on the weight and the row layout, never on the row count, so
// a row of a T-row call is bit-identical to the same row alone (SPECDECODE.md §6.3 R-I3).
#pragma once
#include "base/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

#include <cstdint>
#include <type_traits>

namespace dsv4 {
namespace cuda {

constexpr int kGemvWarps = 8;  // outputs per block

// y[r*y_stride + n] = sum_k a(x[r*x_stride + k]) * W(w_row0 + n, k), n < n_out, k < k_in;
// a = bf16 rounding when act_bf16 (L-bf16), identity otherwise (L-island).
template <class W>
__global__ void gemv_kernel(W w, int64_t w_row0, const float* x, int64_t x_stride, int64_t k_in,
                            bool act_bf16, float* y, int64_t y_stride, int64_t n_out, int rows) {
  const int lane = threadIdx.x % kWarp;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
  if (n >= n_out) return;  // whole warps exit together
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* xr = x + r * x_stride;
    float acc = 0.0f;
    for (int64_t k = lane; k < k_in; k += kWarp) {
      const float a = act_bf16 ? bf16_round(xr[k]) : xr[k];
      acc += a * w.at(w_row0 + n, k);
    }
    acc = warp_sum(acc);
    if (lane == 0) y[r * y_stride + n] = acc;
  }
}

// 16-byte chunk decoders for the fast path: chunk (r, c0) holds W(r, c0 .. c0 + kVec).
struct Fp8Chunks {  // §3.4: e4m3(code) * e8m0(block scale); a chunk lies in one 128-block
  static constexpr int kVec = 16;
  Fp8W w;
  __device__ void load(int64_t r, int64_t c0, float (&f)[kVec]) const {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(w.codes + r * w.cols + c0));
    const float s = e8m0_to_f32(w.scales[(r >> 7) * w.scale_cols + (c0 >> 7)]);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      f[i] = e4m3_to_f32(static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4)))) * s;
  }
};
struct Bf16Chunks {
  static constexpr int kVec = 8;
  const uint16_t* p;
  int64_t cols;
  __device__ void load(int64_t r, int64_t c0, float (&f)[kVec]) const {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(p + r * cols + c0));
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      f[i] = bf16_to_f32(static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2))));
  }
};
struct F32Chunks {
  static constexpr int kVec = 4;
  const float* p;
  int64_t cols;
  __device__ void load(int64_t r, int64_t c0, float (&f)[kVec]) const {
    const float4 q = __ldg(reinterpret_cast<const float4*>(p + r * cols + c0));
    f[0] = q.x;
    f[1] = q.y;
    f[2] = q.z;
    f[3] = q.w;
  }
};

// The fast path of gemv_kernel: k_in % C::kVec == 0, weight rows and x rows 16-byte aligned.
template <class C>
__global__ void gemv_chunk_kernel(C w, int64_t w_row0, const float* x, int64_t x_stride,
                                  int64_t k_in, bool act_bf16, float* y, int64_t y_stride,
                                  int64_t n_out, int rows) {
  constexpr int kVec = C::kVec;
  const int lane = threadIdx.x % kWarp;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
  if (n >= n_out) return;  // whole warps exit together
  const int64_t chunks = k_in / kVec;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* xr = x + r * x_stride;
    float acc = 0.0f;
    for (int64_t ch = lane; ch < chunks; ch += kWarp) {
      const int64_t c0 = ch * kVec;
      float wv[kVec];
      w.load(w_row0 + n, c0, wv);
#pragma unroll
      for (int v = 0; v < kVec; v += 4) {
        const float4 xv = *reinterpret_cast<const float4*>(xr + c0 + v);
        const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float a = act_bf16 ? bf16_round(xs[i]) : xs[i];
          acc += a * wv[v + i];
        }
      }
    }
    acc = warp_sum(acc);
    if (lane == 0) y[r * y_stride + n] = acc;
  }
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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

}  // namespace cuda

template <class C>
bool CudaOps::gemv_chunks(const C& c, int64_t w_row0, const float* x, int64_t x_stride,
                          int64_t k_in, bool act_bf16, float* y, int64_t y_stride, int64_t n_out,
                          int rows, dim3 grid) {
  // x rows: 16-byte aligned starts (float4 loads); k_in whole chunks of the weight row.
  if (k_in % C::kVec != 0 || !cuda::aligned16(x) || x_stride % 4 != 0) return false;
  cuda::gemv_chunk_kernel<<<grid, cuda::kGemvWarps * cuda::kWarp, 0, stream_>>>(
      c, w_row0, x, x_stride, k_in, act_bf16, y, y_stride, n_out, rows);
  DSV4_CUDA_LAUNCH_CHECK();
  return true;
}

template <class W>
void CudaOps::gemv(const W& w, int64_t w_row0, const float* x, int64_t x_stride, int64_t k_in,
                   bool act_bf16, float* y, int64_t y_stride, int64_t n_out, int rows) {
  if (rows == 0 || n_out == 0) return;
  activate();
  const dim3 grid(static_cast<unsigned>((n_out + cuda::kGemvWarps - 1) / cuda::kGemvWarps),
                  cuda::grid_rows(rows));
  if constexpr (std::is_same_v<W, cuda::Fp8W>) {
    cuda::Fp8Chunks c;
    if (cuda::chunks_of(w, c) &&
        gemv_chunks(c, w_row0, x, x_stride, k_in, act_bf16, y, y_stride, n_out, rows, grid))
      return;
  } else if constexpr (std::is_same_v<W, cuda::DenseW>) {
    cuda::Bf16Chunks b;
    cuda::F32Chunks f;
    if (cuda::chunks_of(w, b) &&
        gemv_chunks(b, w_row0, x, x_stride, k_in, act_bf16, y, y_stride, n_out, rows, grid))
      return;
    if (cuda::chunks_of(w, f) &&
        gemv_chunks(f, w_row0, x, x_stride, k_in, act_bf16, y, y_stride, n_out, rows, grid))
      return;
  }
  cuda::gemv_kernel<<<grid, cuda::kGemvWarps * cuda::kWarp, 0, stream_>>>(
      w, w_row0, x, x_stride, k_in, act_bf16, y, y_stride, n_out, rows);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4
