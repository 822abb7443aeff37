#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/parallel_rows.h"

namespace dsv4 {

void cpu_sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                        const int32_t* idx, int width, const TensorView& sink, float scale,
                        float* o) {
  if (sink.numel() != heads)
    throw Error(cat("sink_attention: ", sink.name, " has ", sink.numel(), " entries, expected ",
                    heads, " heads"));
  // Threads split the (row, head) pairs; each range has its own logit and acc scratch.
  parallel_rows(static_cast<int64_t>(rows) * heads, int64_t{2} * width * dim,
                [&](int64_t p0, int64_t p1) {
    std::vector<double> logit(width);
    std::vector<double> acc(dim);
    for (int64_t p = p0; p < p1; ++p) {
      const int t = static_cast<int>(p / heads), h = static_cast<int>(p % heads);
      const int32_t* row = idx + static_cast<size_t>(t) * width;
      const float* qh = q + static_cast<size_t>(p) * dim;
      const double sink_logit = sink.f32_at(h);
      double m = sink_logit;  // D12: the sink takes part in the running max
      for (int k = 0; k < width; ++k) {
        if (row[k] < 0) continue;
        const float* v = kv + static_cast<size_t>(row[k]) * dim;
        double dot = 0.0;
        for (int i = 0; i < dim; ++i) dot += double(qh[i]) * double(v[i]);
        logit[k] = double(scale) * dot;
        m = std::max(m, logit[k]);
      }
      double den = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int k = 0; k < width; ++k) {  // index-row order
        if (row[k] < 0) continue;
        const double pk = std::exp(logit[k] - m);
        den += pk;
        const float* v = kv + static_cast<size_t>(row[k]) * dim;
        for (int i = 0; i < dim; ++i) acc[i] += pk * double(v[i]);
      }
      den += std::exp(sink_logit - m);  // §4.20: the sink has a zero value vector
      float* oh = o + static_cast<size_t>(p) * dim;
      for (int i = 0; i < dim; ++i) oh[i] = static_cast<float>(acc[i] / den);
    }
  });
}

}  // namespace dsv4
