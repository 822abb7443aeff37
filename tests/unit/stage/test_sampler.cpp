// The sampler (stage/sampler.h): each filter against hand-computed distributions, the
// kept sets on random rows, fixed-seed determinism, and a chi-square goodness of fit of
// the drawn tokens on a known distribution.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "base/error.h"
#include "stage/sampler.h"

namespace dsv4 {

namespace {
// Logits whose softmax is {0.5, 0.3, 0.15, 0.05}.
const std::vector<float> kKnown = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                   std::log(0.05f)};

SamplingParams at_temperature(double t) {
  SamplingParams p;
  p.temperature = t;
  return p;
}

void check_probs(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}
}  // namespace

TEST_CASE("temperature 1 is the softmax; temperature 2 flattens it to sqrt(p)") {
  check_probs(sampling_probabilities(kKnown.data(), 4, at_temperature(1)), {0.5, 0.3, 0.15, 0.05});
  const double s = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05);
  check_probs(sampling_probabilities(kKnown.data(), 4, at_temperature(2)),
              {std::sqrt(0.5) / s, std::sqrt(0.3) / s, std::sqrt(0.15) / s, std::sqrt(0.05) / s});
}

TEST_CASE("top-k, top-p and min-p keep the documented sets, renormalized") {
  SamplingParams p = at_temperature(1);
  p.top_k = 2;
  check_probs(sampling_probabilities(kKnown.data(), 4, p), {0.625, 0.375, 0, 0});
  p = at_temperature(1);
  p.top_p = 0.8;  // 0.5 + 0.3 reaches 0.8: the third token is not needed
  check_probs(sampling_probabilities(kKnown.data(), 4, p), {0.625, 0.375, 0, 0});
  p.top_p = 0.81;
  check_probs(sampling_probabilities(kKnown.data(), 4, p), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
  p = at_temperature(1);
  p.min_p = 0.2;  // threshold 0.2 * 0.5 = 0.1
  check_probs(sampling_probabilities(kKnown.data(), 4, p), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
  p.top_k = 1;  // every filter keeps at least the most probable token
  check_probs(sampling_probabilities(kKnown.data(), 4, p), {1, 0, 0, 0});
}

TEST_CASE("top-k never yields a token outside the k most probable") {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<float> row(512);
  SamplingParams p = at_temperature(1.5);
  p.top_k = 5;
  p.seed = 11;
  for (int64_t pos = 0; pos < 400; ++pos) {
    for (float& v : row) v = normal(gen);
    std::vector<int32_t> ids(row.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    const std::set<int32_t> top(ids.begin(), ids.begin() + 5);
    CHECK(top.count(sample_token(row.data(), 512, p, pos)) == 1);
  }
}

TEST_CASE("the same seed and position give the same token; other seeds differ somewhere") {
  SamplingParams a = at_temperature(1), b = a;
  a.seed = 42;
  b.seed = 43;
  std::vector<int32_t> ta, ta2, tb;
  for (int64_t pos = 0; pos < 200; ++pos) {
    ta.push_back(sample_token(kKnown.data(), 4, a, pos));
    ta2.push_back(sample_token(kKnown.data(), 4, a, pos));
    tb.push_back(sample_token(kKnown.data(), 4, b, pos));
  }
  CHECK(ta == ta2);
  CHECK(ta != tb);
}

TEST_CASE("drawn tokens fit the distribution (chi-square, 3 dof, p = 0.001 bound 16.27)") {
  SamplingParams p = at_temperature(1);
  p.seed = 2024;
  constexpr int kDraws = 20000;
  std::map<int32_t, int> counts;
  for (int64_t pos = 0; pos < kDraws; ++pos) ++counts[sample_token(kKnown.data(), 4, p, pos)];
  const double expected[4] = {0.5, 0.3, 0.15, 0.05};
  double chi2 = 0;
  for (int i = 0; i < 4; ++i) {
    const double e = expected[i] * kDraws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  CHECK(counts.size() == 4);
  CHECK(chi2 < 16.27);
}

TEST_CASE("sampling_uniform lies in [0, 1) with mean 1/2") {
  double sum = 0;
  for (int64_t pos = 0; pos < 100000; ++pos) {
    const double u = sampling_uniform(5, pos);
    REQUIRE(u >= 0);
    REQUIRE(u < 1);
    sum += u;
  }
  CHECK(sum / 100000 == doctest::Approx(0.5).epsilon(0.01));  // sd of the mean ~0.0009
}

TEST_CASE("check_sampling refuses out-of-range values by name") {
  SamplingParams p;
  p.temperature = -1;
  CHECK_THROWS_WITH_AS(check_sampling(p, "--"), doctest::Contains("--temperature: -1"), Error);
  p = SamplingParams{};
  p.top_p = 0;
  CHECK_THROWS_WITH_AS(check_sampling(p, ""), doctest::Contains("top_p: 0"), Error);
  p = SamplingParams{};
  p.min_p = 1.5;
  CHECK_THROWS_WITH_AS(check_sampling(p, ""), doctest::Contains("min_p"), Error);
  p = SamplingParams{};
  p.top_k = -2;
  CHECK_THROWS_WITH_AS(check_sampling(p, ""), doctest::Contains("top_k: -2"), Error);
  CHECK_NOTHROW(check_sampling(SamplingParams{}, ""));
}

}  // namespace dsv4
