// The trunk head (MODEL.md §4.25): HC head, final norm, logits of any rows.
#pragma once
#include "kernels/ops.h"
#include "model/config.h"
#include "model/weights.h"

namespace dsv4 {

// logits [rows, V] of h [rows, hc, H]; y [rows, H] is scratch.
void trunk_head_logits(Ops& ops, const ModelConfig& c, const HeadWeights& w,
                       const TensorView& head_matrix, const float* h, int rows, float* y,
                       float* logits);

}  // namespace dsv4
