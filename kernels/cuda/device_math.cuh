// Device-side building blocks shared by the CUDA kernels: weight accessors that decode
// in-register with base/scalar_formats.h's decoders (CHECKPOINT.md §3), and fixed-order
// reductions (MODEL.md §6.8 law 1: one written order, no float atomics).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "base/scalar_formats.h"

namespace dsv4::cuda {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// ---- weight accessors: element (r, c) of the exact dequantized weight ----

// BF16 or F32 [rows, cols] (islands, norms, bf16 linears).
struct DenseW {
  const void* p = nullptr;
  bool bf16 = false;
  int64_t cols = 0;
  __device__ float at(int64_t i) const {
    return bf16 ? bf16_to_f32(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
  }
  __device__ float at(int64_t r, int64_t c) const { return at(r * cols + c); }
};

// FP8 128x128 block-scaled W = e4m3(code) * e8m0(scale) (§3.4).
struct Fp8W {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;  // [ceil(rows/128), scale_cols]
  int64_t cols = 0, scale_cols = 0;
  __device__ float at(int64_t r, int64_t c) const {
    return e4m3_to_f32(codes[r * cols + c]) * e8m0_to_f32(scales[(r >> 7) * scale_cols + (c >> 7)]);
  }
};

// FP4 expert projection (§3.6 MXFP4 / §3.7 NVFP4, canonical order e4m3(sb)*s2 first).
struct Fp4W {
  const uint8_t* packed = nullptr;  // [rows, cols/2], even c low nibble
  const uint8_t* scales = nullptr;  // [rows, cols/group]
  float scale_2 = 1.0f;
  int64_t cols = 0;
  int group = 32;
  bool nv = false;

  // One run of kRun elements = 16 packed bytes = one MXFP4 scale block / two NVFP4 ones.
  static constexpr int kRun = 32;
  // The packed bytes of the run at (r, c0) (c0 % kRun == 0, c0 + kRun <= cols): element
  // c0 + i is nibble i % 8 of word i / 8 (byte i / 2, even i low nibble, §3.5). One 128-bit
  // load when the run is 16-byte aligned, else 16 byte loads (same values).
  __device__ void words(int64_t r, int64_t c0, uint32_t (&w)[4]) const {
    const uint8_t* p = packed + r * (cols >> 1) + (c0 >> 1);
    if (reinterpret_cast<uintptr_t>(p) % 16 == 0) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(p));
      w[0] = q.x;
      w[1] = q.y;
      w[2] = q.z;
      w[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w[j] = __ldg(p + 4 * j) | (uint32_t{__ldg(p + 4 * j + 1)} << 8) |
               (uint32_t{__ldg(p + 4 * j + 2)} << 16) | (uint32_t{__ldg(p + 4 * j + 3)} << 24);
    }
  }
};

// One routed expert's projections (§2.5): w1 gate [I, H], w3 up [I, H], w2 down [H, I].
struct ExpertW {
  Fp4W w1, w3, w2;
};

// ---- fixed-order reductions ----

// Butterfly over the warp: every lane ends with the same bits (addition is commutative).
__device__ inline float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Block sum in a fixed tree (warp butterflies, then the warp partials in a butterfly);
// every thread gets the result. `shared` holds >= 32 floats; blockDim.x % 32 == 0.
__device__ inline float block_sum(float v, float* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float p = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(p);
}

__device__ inline float block_max(float v, float* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float p = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(p);
}

// Grid-stride helpers for launches with a fixed block size.
inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 64 ? 65535 * 64 : b));
}
// Rows go on grid.y (at most 65535; kernels loop over the rest).
inline unsigned grid_rows(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows > 65535 ? 65535 : rows));
}

}  // namespace dsv4::cuda
