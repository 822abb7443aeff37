// CPU activation quantizers of MODEL.md §4.8-§4.11 (values f32, scales powers of two,
// rounding RNE through base/scalar_formats.h).
#pragma once
#include <cstdint>

#include "kernels/numerics.h"

namespace dsv4 {

// §3.1 block scale: pow2ceil(fl32(max(max_i |x_i|, amax_floor) * inv_max)), x [n]
// (inv_max = kInv448 for e4m3, kInv6 for e2m1).
float cpu_group_scale(const float* x, int n, float amax_floor, float inv_max);

// §4.8: fake-quant of dims [0, dim - rd) of each row of v [rows, dim] in groups of 64;
// the rope dims [dim - rd, dim) are untouched. Variant per D1.
void cpu_kv_act_quant(float* v, int rows, int dim, int rd, KvQuant variant);

// §4.9: x [n] (n a multiple of 128) -> e4m3fn codes [n] and scales [n / 128].
void cpu_act_quant_fp8(const float* x, int n, uint8_t* codes, float* scales);

// §4.10: FP4 fake-quant of v [n] in place, groups of 32 (n a multiple of 32).
void cpu_fp4_act_quant(float* v, int n);

// §4.11 with D9: v [dim] <- fl32(dim^-0.5) * H_dim v, butterfly stages of increasing
// stride in f32, the scale applied last; dim a power of two.
void cpu_hadamard(float* v, int dim);

// cpu_hadamard then, when fp4, cpu_fp4_act_quant on each of `vectors` vectors [dim].
void cpu_hadamard_fp4(float* v, int vectors, int dim, bool fp4);

}  // namespace dsv4
