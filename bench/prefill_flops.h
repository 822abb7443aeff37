// The floating-point work of a prefill, counted from the model's shapes (issue 13's
// achieved TFLOP/s): what a prompt of P tokens costs through the trunk plus the head's
// last row. Elementwise ops (norms, rope, quantizers, Sinkhorn, softmax) are left out:
// they are O(H) per row against O(H^2) for the matrices.
#pragma once
#include <cstdint>

#include "model/config.h"

namespace dsv4 {

// FLOPs (a multiply-add counts 2) of positions 0..P-1 through trunk layers
// [0, c.num_hidden_layers) and the logits of the last row.
double prefill_flops(const ModelConfig& c, int64_t prompt_len);

}  // namespace dsv4
