// The benchmarks' timing: wall time of calls that end synchronized on the host, and the
// median that their rows report.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace dsv4 {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Milliseconds of each of `steps` calls of `step` after `warmup` untimed ones (each call
// ends synchronized on the host).
template <class F>
std::vector<double> time_steps(int warmup, int steps, F step) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

}  // namespace dsv4
