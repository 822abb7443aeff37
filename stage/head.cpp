#include "stage/head.h"

namespace dsv4 {

void trunk_head_logits(Ops& ops, const ModelConfig& c, const HeadWeights& w,
                       const TensorView& head_matrix, const float* h, int rows, float* y,
                       float* logits) {
  ops.hc_head(h, rows, c.hc_mult, c.hidden_size, w, c.rms_norm_eps, c.hc_eps, y);  // steps 1-3
  ops.rmsnorm(y, w.norm, rows, c.hidden_size, c.rms_norm_eps, y);                   // step 4
  ops.linear_island(head_matrix, y, rows, logits);                                  // step 5
}

}  // namespace dsv4
