#include "kernels/cpu/indexer.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/parallel_rows.h"

namespace dsv4 {

void cpu_indexer_scores(const float* q_row, const float* w_row, int heads, int dim,
                        float wscale, const float* keys, int n, float* scores) {
  std::vector<float> wp(heads);  // D7: w' = fl32(w * wscale) before the head sum
  for (int h = 0; h < heads; ++h) wp[h] = w_row[h] * wscale;
  parallel_rows(n, int64_t{heads} * dim, [&](int64_t j0, int64_t j1) {  // threads split the keys
    for (int64_t j = j0; j < j1; ++j) {
      const float* key = keys + static_cast<size_t>(j) * dim;
      double score = 0.0;
      for (int h = 0; h < heads; ++h) {
        const float* qh = q_row + static_cast<size_t>(h) * dim;
        double dot = 0.0;
        for (int i = 0; i < dim; ++i) dot += double(qh[i]) * double(key[i]);
        score += double(wp[h]) * std::max(0.0, dot);
      }
      scores[j] = static_cast<float>(score);
    }
  });
}

void cpu_indexer_topk(const float* q, const float* w, int rows, int heads, int dim,
                      float wscale, const float* keys, const int32_t* n_visible, int width,
                      int index_base, int32_t* idx, int idx_stride, int col0) {
  DSV4_CHECK(col0 >= 0 && col0 + width <= idx_stride, "col0 ", col0, " width ", width,
             " stride ", idx_stride);
  std::vector<float> scores;
  std::vector<int32_t> order;
  for (int t = 0; t < rows; ++t) {
    const int n = n_visible[t];
    DSV4_CHECK(n >= 0, "row ", t, " n_visible ", n);
    scores.resize(n);
    cpu_indexer_scores(q + static_cast<size_t>(t) * heads * dim, w + static_cast<size_t>(t) * heads,
                       heads, dim, wscale, keys, n, scores.data());
    const int keep = std::min(width, n);
    order.resize(n);
    std::iota(order.begin(), order.end(), 0);
    // D10: score descending, then block index ascending.
    std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                      [&](int32_t a, int32_t b) {
                        return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
                      });
    int32_t* out = idx + static_cast<size_t>(t) * idx_stride + col0;
    for (int slot = 0; slot < width; ++slot)
      out[slot] = slot < keep ? index_base + order[slot] : -1;
  }
}

}  // namespace dsv4
