// Sparse sink attention (MODEL.md §4.20 with D12), CPU reference: f64 chains for
// logits, normalizer and output, each output element rounded once to f32 (D6).
#pragma once
#include <cstdint>

#include "model/tensor_view.h"

namespace dsv4 {

// q [rows, heads, dim] attends kv rows kv[idx[t*width + k]] (kv [*, dim], K = V) in
// index-row order; -1 entries are skipped entirely (bit-inert, MODEL §6.8 law 3).
// sink F32/BF16 [heads] joins the running max and the denominator, unscaled.
// o [rows, heads, dim].
void cpu_sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                        const int32_t* idx, int width, const TensorView& sink, float scale,
                        float* o);

}  // namespace dsv4
