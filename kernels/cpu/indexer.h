// Lightning-indexer scoring and top-k (MODEL.md §4.18 steps 4-7, §6.5; D7, D10), CPU
// reference: f64 score chain rounded once to f32 (D6).
#pragma once
#include <cstdint>

namespace dsv4 {

// q [rows, heads, dim], w [rows, heads] raw weights_proj outputs, keys [*, dim].
// Row t scores keys [0, n_visible[t]):
//   score[j] = sum_h (h ascending) fl32(w[t,h]*wscale) * max(0, q[t,h,:].keys[j,:]),
// keeps the min(width, n_visible[t]) best ordered (score desc, j asc) and writes
// idx[t*idx_stride + col0 + slot] = index_base + j; the remaining slots up to width
// are -1. Prefill law: n_visible[t] = (t+1)/4, width = min(topk, nb), index_base = s;
// decode law: n_visible = nb, width = min(topk, nb), index_base = W.
void cpu_indexer_topk(const float* q, const float* w, int rows, int heads, int dim,
                      float wscale, const float* keys, const int32_t* n_visible, int width,
                      int index_base, int32_t* idx, int idx_stride, int col0);

// The f32-rounded scores of one query row against keys [0, n) (the values top-k orders).
void cpu_indexer_scores(const float* q_row, const float* w_row, int heads, int dim,
                        float wscale, const float* keys, int n, float* scores);

}  // namespace dsv4
