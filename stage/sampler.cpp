#include "stage/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"

namespace dsv4 {

void check_sampling(const SamplingParams& p, const std::string& where) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    throw Error(cat(where, "temperature: ", p.temperature, " (must be >= 0; 0 is greedy)"));
  if (p.top_k < 0) throw Error(cat(where, "top_k: ", p.top_k, " (must be >= 0; 0 keeps all)"));
  if (!(p.top_p > 0 && p.top_p <= 1))
    throw Error(cat(where, "top_p: ", p.top_p, " (must be in (0, 1]; 1 keeps all)"));
  if (!(p.min_p >= 0 && p.min_p <= 1))
    throw Error(cat(where, "min_p: ", p.min_p, " (must be in [0, 1]; 0 keeps all)"));
}

std::vector<double> sampling_probabilities(const float* logits, int64_t vocab,
                                           const SamplingParams& p) {
  DSV4_CHECK(p.temperature > 0 && vocab > 0, "temperature ", p.temperature, ", vocab ", vocab);
  const auto n = static_cast<size_t>(vocab);
  // Softmax of logits / T, unnormalized: w_i = exp((l_i - max) / T), in double.
  const float top = *std::max_element(logits, logits + n);
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i)
    w[i] = std::exp((static_cast<double>(logits[i]) - top) / p.temperature);

  // The kept set, most probable first (ties: lower id first).
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto more_probable = [&](int32_t a, int32_t b) { return w[a] != w[b] ? w[a] > w[b] : a < b; };
  size_t kept = n;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) kept = static_cast<size_t>(p.top_k);
  if (p.top_p < 1) {
    std::sort(order.begin(), order.end(), more_probable);
    double mass = 0;
    for (size_t j = 0; j < kept; ++j) mass += w[order[j]];
    double before = 0;  // keep j while the mass ranked above it is < top_p
    size_t j = 0;
    for (; j < kept && before < p.top_p * mass; ++j) before += w[order[j]];
    kept = j;
  } else if (kept < n) {
    std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(kept), order.end(),
                      more_probable);
  }
  // min-p relative to the most probable token (w = 1 there: it is the max logit).
  std::vector<double> prob(n, 0.0);
  double total = 0;
  for (size_t j = 0; j < kept; ++j) {
    const int32_t id = kept == n ? static_cast<int32_t>(j) : order[j];
    if (w[id] < p.min_p) continue;
    prob[id] = w[id];
    total += w[id];
  }
  for (double& v : prob) v /= total;
  return prob;
}

double sampling_uniform(uint64_t seed, int64_t position) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(position) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p,
                     int64_t position) {
  const std::vector<double> prob = sampling_probabilities(logits, vocab, p);
  const double u = sampling_uniform(p.seed, position);
  double cum = 0;
  int32_t last = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (prob[static_cast<size_t>(i)] == 0) continue;
    cum += prob[static_cast<size_t>(i)];
    last = static_cast<int32_t>(i);
    if (u < cum) return last;
  }
  return last;  // rounding left cum just below u: the last kept token
}

}  // namespace dsv4
