// Device activation quantizers (MODEL.md §3.1, §4.8-§4.11), rounding through
// base/scalar_formats.h so both backends round identically. Each helper is called by
// every lane of one warp (or every thread of one block for the Hadamard) with uniform
// arguments.
#pragma once
#include "kernels/cuda/device_math.cuh"

namespace dsv4::cuda {

constexpr float kE4m3Max = 448.0f;
constexpr float kE2m1Max = 6.0f;
constexpr float kKvAmaxFloor = 1e-4f;  // §4.8, §4.9

// std::clamp semantics (a NaN passes through), unlike fminf/fmaxf.
__device__ inline float clamp_keep_nan(float v, float lo, float hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}

// std::max(amax, |x|) of the CPU reference: a NaN element leaves amax unchanged.
__device__ inline float amax_step(float amax, float x) {
  const float a = fabsf(x);
  return amax < a ? a : amax;
}
__device__ inline float warp_amax(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = amax_step(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// §4.8 on one group of 64 (lane l owns x[l] and x[32 + l]).
__device__ inline void kv_quant_group64(float* x, bool e4m3) {
  const int lane = threadIdx.x % kWarp;
  float v[2] = {x[lane], x[kWarp + lane]};
  float amax = amax_step(amax_step(kKvAmaxFloor, v[0]), v[1]);
  const float s = pow2ceil(warp_amax(amax) * kInv448);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float q = clamp_keep_nan(v[i] / s, -kE4m3Max, kE4m3Max);
    x[i * kWarp + lane] = (e4m3 ? e4m3_round(q) : q) * s;
  }
}

// §4.10 on one group of 32 (lane l owns x[l]).
__device__ inline void fp4_quant_group32(float* x) {
  const int lane = threadIdx.x % kWarp;
  const float floor = f32_from_bits(0x01C00000u);  // 6 * 2^-126
  const float v = x[lane];
  const float s = pow2ceil(warp_amax(amax_step(floor, v)) * kInv6);
  x[lane] = e2m1_round(clamp_keep_nan(v / s, -kE2m1Max, kE2m1Max)) * s;
}

// §4.9 on one block of 128 (lane l owns x[32i + l]): q[k] = e4m3 value of the code, the
// block scale is returned.
__device__ inline float act_quant128(const float* x, float* q) {
  const int lane = threadIdx.x % kWarp;
  float v[4];
  float amax = kKvAmaxFloor;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = x[i * kWarp + lane];
    amax = amax_step(amax, v[i]);
  }
  const float s = pow2ceil(warp_amax(amax) * kInv448);
#pragma unroll
  for (int i = 0; i < 4; ++i) q[i * kWarp + lane] = e4m3_round(clamp_keep_nan(v[i] / s, -kE4m3Max, kE4m3Max));
  return s;
}

// §4.11 with D9 on v [dim] in shared memory, dim a power of two: butterfly stages of
// increasing stride in f32, then the scale. Called by all threads of the block.
__device__ inline void hadamard_shared(float* v, int dim, float scale) {
  for (int stride = 1; stride < dim; stride *= 2) {
    __syncthreads();
    for (int p = threadIdx.x; p < dim / 2; p += blockDim.x) {
      const int j = (p / stride) * 2 * stride + p % stride;
      const float a = v[j], b = v[j + stride];
      v[j] = a + b;
      v[j + stride] = a - b;
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < dim; j += blockDim.x) v[j] *= scale;
  __syncthreads();
}

// §4.8 on dims [0, nope) of a row (nope % 64 == 0): warp w quantizes groups w, w + warps, ...
// Called by every thread of the block (a warp's groups are uniform across its lanes).
__device__ inline void block_kv_quant(float* row, int nope, bool e4m3) {
  const int warps = blockDim.x / kWarp;
  for (int g = threadIdx.x / kWarp; g < nope / 64; g += warps) kv_quant_group64(row + g * 64, e4m3);
}

// §4.11 then (fp4) §4.10 on v [dim] in shared memory, by every thread of the block: warp w
// quantizes groups of 32 w, w + warps, ... after the rotation; ends with a barrier.
__device__ inline void block_hadamard_fp4(float* v, int dim, float scale, bool fp4) {
  hadamard_shared(v, dim, scale);
  if (fp4)
    for (int g = threadIdx.x / kWarp; g < dim / kWarp; g += blockDim.x / kWarp) fp4_quant_group32(v + g * kWarp);
  __syncthreads();
}

}  // namespace dsv4::cuda

namespace dsv4 {
// fl32(dim^-0.5), the Hadamard scale exactly as the CPU reference computes it (§4.11).
float hadamard_scale(int dim);
// The shapes the quantizer kernels take (an Error naming them otherwise): kv fake-quant of
// dims [0, dim - rd) in groups of 64; a Hadamard of a power of two in [32, 1024] (one block).
void check_kv_quant_dims(int dim, int rd);
void check_hadamard_dim(int dim);
}  // namespace dsv4
