// One RoPE pair (MODEL.md §4.7), shared by the rope ops and the compressor's finishing:
// the f32 complex multiply of the CPU twin.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::cuda {

// Rotates x[0], x[1] (pair `pair` of the rope dims) by the table entry of position p;
// fc [n_positions, rd]. A position outside the table makes the pair NaN (a *_dev op
// cannot refuse it by name, kernels/ops.h).
__device__ inline void rope_pair(float* x, const float* fc, int rd, int64_t n_positions, int64_t p,
                                 int pair, bool inverse) {
  if (p < 0 || p >= n_positions) {
    x[0] = x[1] = NAN;
    return;
  }
  const float* f = fc + p * rd + 2 * pair;
  const float c = f[0];
  const float s = inverse ? -f[1] : f[1];
  const float a = x[0], b = x[1];
  x[0] = a * c - b * s;
  x[1] = a * s + b * c;
}

}  // namespace dsv4::cuda

namespace dsv4 {
struct RopeTable;
// Host positions [rows] inside the table, else an Error naming `op` (the host-position rope
// ops refuse what their *_dev forms turn into NaN rope dims).
void check_rope_positions(const char* op, const RopeTable& t, const int32_t* positions, int rows);
}  // namespace dsv4
