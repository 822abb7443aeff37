#include "kernels/cpu/norm.h"

#include <cmath>

#include "base/error.h"

namespace dsv4 {

double cpu_inv_rms(const float* x, int64_t n, double eps) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  return 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);  // eps inside the sqrt (§4.2)
}

void cpu_rmsnorm(CpuWeightCache& cache, const float* x, const TensorView& w, int rows, int n,
                 double eps, float* y) {
  if (w.numel() != n)
    throw Error(cat("rmsnorm: weight '", w.name, "' has ", w.numel(), " elements, rows have ", n));
  const float* wf = cache.widened(w);  // [n]
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * n;
    float* yr = y + static_cast<int64_t>(r) * n;
    const double inv = cpu_inv_rms(xr, n, eps);
    // Normalize first, then the weight ([M] RMSNorm operand order).
    for (int i = 0; i < n; ++i) yr[i] = static_cast<float>(wf[i] * (xr[i] * inv));
  }
}

void cpu_head_rms(float* v, int vectors, int n, double eps) {
  for (int h = 0; h < vectors; ++h) {
    float* vh = v + static_cast<int64_t>(h) * n;
    const double inv = cpu_inv_rms(vh, n, eps);
    for (int i = 0; i < n; ++i) vh[i] = static_cast<float>(vh[i] * inv);
  }
}

}  // namespace dsv4
