// CPU embedding gather (MODEL.md §4.1), argmax (D10) and elementwise add.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/tensor_view.h"

namespace dsv4 {

// §4.1: h[t, c, :] = table[ids[t], :] for c < hc; table BF16/F32 [V, hidden], ids [s].
// Rows are widened on the fly (no f32 copy of the whole table). Throws Error on an id
// outside [0, V).
void cpu_embed(const TensorView& table, const int32_t* ids, int s, int hc, float* h);

// out[r] = index of the largest logits[r, :] (lowest index on ties), -1 if the row has a NaN.
void cpu_argmax(const float* logits, int rows, int64_t n, int32_t* out);

// y[i] += x[i]
void cpu_add(float* y, const float* x, size_t n);

}  // namespace dsv4
