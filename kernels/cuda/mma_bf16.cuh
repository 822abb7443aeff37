// The bf16 tensor-core step of the decode GEMV (linear.cuh) and the MoE experts:
// mma.sync.m16n8k16 (bf16 in, f32 accumulate) and its exact bf16x2 operands.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace dsv4::cuda {

__device__ inline uint32_t bf16x2_bits(__nv_bfloat162 v) { return *reinterpret_cast<const uint32_t*>(&v); }
__device__ inline __nv_bfloat162 bf16x2_of(uint32_t v) { return *reinterpret_cast<const __nv_bfloat162*>(&v); }

// {lo, hi} as P bf16x2 planes (lo in the low half): plane p is the RNE bf16 rounding (the
// L-bf16 rounding of MODEL.md §3.3) of what planes < p leave. P = 1 rounds (exact for
// bf16-rounded activations and e4m3 values); P = 3 is exact for f32 (24 = 3 x 8
// significant bits; the residual of an RNE rounding is representable).
template <int P>
__device__ inline void bf16x2_planes(float lo, float hi, uint32_t (&b)[P]) {
#pragma unroll
  for (int p = 0; p < P; ++p) {
    b[p] = bf16x2_bits(__floats2bfloat162_rn(lo, hi));
    const float2 v = __bfloat1622float2(bf16x2_of(b[p]));
    lo -= v.x;
    hi -= v.y;
  }
}

// d += A B for one m16n8k16 step (PTX ISA "mma.m16n8k16" fragment layouts): lane
// (g, t) = (lane / 4, lane % 4) holds A rows g, g + 8 at k-slots {2t, 2t+1} (a[0], a[1])
// and {2t+8, 2t+9} (a[2], a[3]), B column g at k-slots {2t, 2t+1} (b0) and {2t+8, 2t+9}
// (b1), D rows g, g + 8 at columns 2t, 2t+1 (d[0], d[1] | d[2], d[3]). A column of D
// depends on that column of B alone.
__device__ inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace dsv4::cuda
