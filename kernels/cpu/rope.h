// CPU RoPE application (MODEL.md §4.7): interleaved pairs of the last t.rope_dim dims.
#pragma once
#include <cstdint>

#include "kernels/rope_table.h"

namespace dsv4 {

// v [rows, heads, dim]; row r rotated at position positions[r] (host [rows]); the inverse
// uses -sin. Throws Error when a position is outside the table.
void cpu_rope(float* v, int rows, int heads, int dim, const RopeTable& t,
              const int32_t* positions, bool inverse);

}  // namespace dsv4
