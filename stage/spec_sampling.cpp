#include "stage/spec_sampling.h"

#include <algorithm>

#include "base/error.h"

namespace dsv4 {

int32_t inverse_cdf(const std::vector<double>& p, double u) {
  DSV4_CHECK(u >= 0 && u < 1, "inverse CDF at u = ", u);
  double cum = 0;
  int32_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    cum += p[i];
    last = static_cast<int32_t>(i);
    if (u < cum) return last;
  }
  DSV4_CHECK(last >= 0, "inverse CDF of a distribution without mass");
  return last;
}

SampledVerdict accept_sampled_draft(const std::vector<double>& p, const std::vector<double>& q,
                                    int32_t d, double u_accept, double u_residual) {
  DSV4_CHECK(p.size() == q.size() && d >= 0 && static_cast<size_t>(d) < p.size(),
             "speculative sampling: p of ", p.size(), ", q of ", q.size(), ", draft ", d);
  const double pd = p[static_cast<size_t>(d)], qd = q[static_cast<size_t>(d)];
  DSV4_CHECK(qd > 0, "speculative sampling: draft ", d, " has q = 0");
  if (u_accept < std::min(1.0, pd / qd)) return {true, d};
  // Residual norm(max(0, p - q)); it has mass whenever rejection is possible (p != q).
  std::vector<double> residual(p.size());
  double mass = 0;
  for (size_t i = 0; i < p.size(); ++i) mass += residual[i] = std::max(0.0, p[i] - q[i]);
  DSV4_CHECK(mass > 0, "speculative sampling: rejection with p == q");
  for (double& r : residual) r /= mass;
  return {false, inverse_cdf(residual, u_residual)};
}

SampledVerdict accept_point_mass(const std::vector<double>& p, int32_t d, double u) {
  const int32_t token = inverse_cdf(p, u);
  return {token == d, token};
}

}  // namespace dsv4
