#include "kernels/cpu/head.h"

#include <cmath>

#include "base/error.h"

namespace dsv4 {

void cpu_embed(const TensorView& table, const int32_t* ids, int s, int hc, float* h) {
  if (table.shape.size() != 2 || (table.dtype != DType::BF16 && table.dtype != DType::F32))
    throw Error(cat("embed: tensor '", table.name, "' must be a BF16/F32 [V, hidden] matrix"));
  const int64_t vocab = table.dim(0), hidden = table.dim(1);
  for (int t = 0; t < s; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab)
      throw Error(cat("embed: token id ", ids[t], " at row ", t, " outside [0, ", vocab,
                      ") of tensor '", table.name, "'"));
    float* h0 = h + static_cast<int64_t>(t) * hc * hidden;  // [hc, hidden]
    for (int64_t d = 0; d < hidden; ++d) h0[d] = table.f32_at(ids[t] * hidden + d);
    for (int c = 1; c < hc; ++c)
      for (int64_t d = 0; d < hidden; ++d) h0[c * hidden + d] = h0[d];
  }
}

void cpu_argmax(const float* logits, int rows, int64_t n, int32_t* out) {
  for (int r = 0; r < rows; ++r) {
    const float* row = logits + r * n;
    int64_t best = 0;
    bool nan = false;
    for (int64_t i = 0; i < n && !nan; ++i) {
      nan = std::isnan(row[i]);
      if (row[i] > row[best]) best = i;  // strict: ties keep the lowest index
    }
    out[r] = nan || n == 0 ? -1 : static_cast<int32_t>(best);
  }
}

void cpu_add(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace dsv4
