// Lossless speculative sampling (stage/spec_sampling.h, issue 15 part 1). The stated test:
// a chi-square test of homogeneity between N = 20,000 tokens emitted with the drafter and
// N = 20,000 tokens of plain sampling (independent uniforms), categories with fewer than
// 10 samples in both together pooled into one; the rule passes at p >= 0.001 and a
// deliberately wrong rule (on rejection it draws from p instead of the residual) fails
// the same test (p < 0.001). On synthetic distributions (general rule and point-mass
// form) and on the tiny model at several positions (verify rows of real rounds). Then
// the round loop with the coupled point-mass rule: same seed, same tokens as plain
// sampling at every depth cap and split, with the DSpark and the replay drafter.
#include <doctest/doctest.h>

#include <boost/math/distributions/chi_squared.hpp>
#include <cmath>
#include <map>
#include <random>

#include "drafter_harness.h"
#include "stage/replay_drafter.h"
#include "stage/spec_sampling.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

constexpr int kSamples = 20000;
constexpr double kAlpha = 0.001;

// p-value of the chi-square homogeneity test of two samples of token ids.
double homogeneity_p(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::map<int32_t, std::pair<double, double>> counts;
  for (int32_t t : a) counts[t].first += 1;
  for (int32_t t : b) counts[t].second += 1;
  std::vector<std::pair<double, double>> bins;
  std::pair<double, double> pooled{0, 0};
  for (const auto& [t, c] : counts) {
    if (c.first + c.second < 10) {
      pooled.first += c.first;
      pooled.second += c.second;
    } else {
      bins.push_back(c);
    }
  }
  if (pooled.first + pooled.second > 0) bins.push_back(pooled);
  if (bins.size() < 2) return 1.0;  // one category: nothing can differ
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  double chi2 = 0;
  for (const auto& [ca, cb] : bins) {
    const double total = ca + cb;
    const double ea = total * na / (na + nb), eb = total * nb / (na + nb);
    chi2 += (ca - ea) * (ca - ea) / ea + (cb - eb) * (cb - eb) / eb;
  }
  const boost::math::chi_squared dist(static_cast<double>(bins.size() - 1));
  return boost::math::cdf(boost::math::complement(dist, chi2));
}

// Softmax of row / temperature in double.
std::vector<double> softmax(const float* row, int64_t vocab, double temperature) {
  const float top = *std::max_element(row, row + vocab);
  std::vector<double> p(static_cast<size_t>(vocab));
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i)
    total += p[static_cast<size_t>(i)] = std::exp((row[i] - top) / temperature);
  for (double& v : p) v /= total;
  return p;
}

// The deliberately wrong rule: accepts a draft d ~ q with min(1, p(d) / q(d)) like the
// real one, but on rejection draws from p itself instead of the residual.
int32_t wrong_rule(const std::vector<double>& p, const std::vector<double>& q, int32_t d,
                   double u_accept, double u_residual) {
  if (u_accept < std::min(1.0, p[static_cast<size_t>(d)] / q[static_cast<size_t>(d)])) return d;
  return inverse_cdf(p, u_residual);
}

// Three samples of kSamples tokens for target p and draft distribution q (q = p with the
// point mass of a deterministic draft d when `point_mass`): plain sampling, the rule,
// and the wrong rule, each from its own uniform stream.
struct Samples {
  std::vector<int32_t> plain, rule, wrong;
};

Samples draw(const std::vector<double>& p, const std::vector<double>& q, int32_t point_mass_draft,
             uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> delta;
  if (point_mass_draft >= 0) {
    delta.assign(p.size(), 0.0);
    delta[static_cast<size_t>(point_mass_draft)] = 1.0;
  }
  Samples s;
  for (int n = 0; n < kSamples; ++n) {
    s.plain.push_back(inverse_cdf(p, u(rng)));
    if (point_mass_draft >= 0) {
      s.rule.push_back(accept_point_mass(p, point_mass_draft, u(rng)).token);
      s.wrong.push_back(wrong_rule(p, delta, point_mass_draft, u(rng), u(rng)));
    } else {
      const int32_t d = inverse_cdf(q, u(rng));
      s.rule.push_back(accept_sampled_draft(p, q, d, u(rng), u(rng)).token);
      const int32_t d2 = inverse_cdf(q, u(rng));
      s.wrong.push_back(wrong_rule(p, q, d2, u(rng), u(rng)));
    }
  }
  return s;
}

void check_rule(const std::vector<double>& p, const std::vector<double>& q, int32_t point_mass,
                uint64_t seed) {
  const Samples s = draw(p, q, point_mass, seed);
  const double good = homogeneity_p(s.rule, s.plain), bad = homogeneity_p(s.wrong, s.plain);
  MESSAGE("p-value: rule ", good, ", wrong rule ", bad);
  CHECK(good >= kAlpha);
  CHECK(bad < kAlpha);
}

// A uniform in [0, 1) keyed by (seed, position): the sampler's per-position stream.
double keyed_uniform(uint64_t seed, int64_t position) {
  std::seed_seq key{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(position)};
  std::mt19937_64 rng(key);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace

TEST_CASE("inverse_cdf: first id whose cumulative mass exceeds u; zero-mass ids are skipped") {
  const std::vector<double> p{0.25, 0.0, 0.5, 0.25};
  CHECK(inverse_cdf(p, 0.0) == 0);
  CHECK(inverse_cdf(p, 0.2499) == 0);
  CHECK(inverse_cdf(p, 0.25) == 2);
  CHECK(inverse_cdf(p, 0.7499) == 2);
  CHECK(inverse_cdf(p, 0.75) == 3);
  CHECK(inverse_cdf({0.5, 0.4999999, 0.0}, 0.9999999999) == 1);  // rounding: last with mass
}

TEST_CASE("accept_sampled_draft: accept with min(1, p/q), else the residual norm(max(0, p - q))") {
  const std::vector<double> p{0.5, 0.3, 0.2, 0.0}, q{0.25, 0.25, 0.25, 0.25};
  // d = 0: p/q = 2, always accepted.
  CHECK(accept_sampled_draft(p, q, 0, 0.999, 0.5).accepted);
  // d = 2: p/q = 0.8: u 0.79 accepts, u 0.81 rejects; residual = (0.25, 0.05, 0, 0) / 0.3.
  CHECK(accept_sampled_draft(p, q, 2, 0.79, 0.5).accepted);
  const SampledVerdict r = accept_sampled_draft(p, q, 2, 0.81, 0.8);
  CHECK_FALSE(r.accepted);
  CHECK(r.token == 0);  // 0.8 < 0.25 / 0.3
  CHECK(accept_sampled_draft(p, q, 2, 0.81, 0.9).token == 1);
  CHECK(accept_sampled_draft(p, q, 3, 0.0, 0.5).token != 3);  // p(3) = 0: never emitted
  // Point mass: the token is plain sampling's inverse CDF at u; accepted iff it is d.
  CHECK(accept_point_mass(p, 1, 0.6).accepted);
  CHECK(accept_point_mass(p, 1, 0.4).token == 0);
  CHECK_FALSE(accept_point_mass(p, 1, 0.4).accepted);
}

TEST_CASE("speculative sampling on synthetic distributions: chi-square p >= 0.001, wrong rule fails") {
  const std::vector<double> p{0.30, 0.20, 0.15, 0.10, 0.10, 0.08, 0.05, 0.02};
  SUBCASE("general rule, q flatter than p") {
    check_rule(p, std::vector<double>(8, 0.125), -1, 1);
  }
  SUBCASE("general rule, q sharper than p and missing a token") {
    check_rule(p, {0.05, 0.50, 0.20, 0.10, 0.05, 0.05, 0.05, 0.0}, -1, 2);
  }
  SUBCASE("point mass on the most probable token") { check_rule(p, {}, 0, 3); }
  SUBCASE("point mass on an unlikely token") { check_rule(p, {}, 6, 4); }
}

// The tiny model, positions m0 + 1 .. m0 + 3 of a round after prompts of 1, 9 and 20
// tokens: the drafts are the verify rows' own greedy tokens (a replay of the greedy run:
// high-probability drafts, where a wrong rule shows most); p_i = softmax(row_i / 0.7) of
// the verify rows, which equal the plain decode rows bit for bit (checked here too), so
// plain sampling at position m0 + i + 1 after the accepted prefix draws from p_i.
TEST_CASE("speculative sampling on the tiny model at several positions: chi-square (20,000 samples)") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const int64_t V = c.vocab_size;
  int tested = 0;
  for (int len : {1, 9, 20}) {
    const std::vector<int32_t> prompt = random_tokens(len, V, 500 + len);
    DraftRun plain(ckpt, *ops), spec(ckpt, *ops);
    const std::vector<int32_t> greedy = plain_stream(plain, prompt, 4);  // t, then 3 tokens
    std::vector<float> rows;  // the plain decode rows of positions m0 + 1 .. m0 + 3
    {
      DraftRun ref(ckpt, *ops);
      ref.start(prompt);
      for (int i = 0; i < 3; ++i) {
        const std::vector<float> r = ref.pipe.decode(greedy[static_cast<size_t>(i)]);
        rows.insert(rows.end(), r.begin(), r.end());
      }
    }
    spec.start(prompt);
    const std::vector<float> verify = spec.pipe.verify(greedy);  // x = [t, d1, d2, d3]
    for (int i = 0; i < 3; ++i) {
      CAPTURE(len);
      CAPTURE(i);
      REQUIRE(same_bits(verify.data() + i * V, rows.data() + i * V, static_cast<size_t>(V)));
      const std::vector<double> p = softmax(verify.data() + i * V, V, 0.7);
      const int32_t d = greedy[static_cast<size_t>(i) + 1];
      MESSAGE("len ", len, " row ", i, ": p(draft) = ", p[static_cast<size_t>(d)]);
      check_rule(p, {}, d, 100 + len * 3 + i);                          // point mass
      check_rule(p, softmax(verify.data() + i * V, V, 1.5), -1, 7 + len * 3 + i);  // q: flatter
      ++tested;
    }
  }
  CHECK(tested == 9);
}

// The coupled point-mass rule in the round loop: each verify row's token is
// inverse_cdf(p_row, u(seed, position)), the draw plain sampling makes at that position;
// accept_walk then keeps exactly the drafts plain sampling would emit. Same seed, same
// tokens, at depth caps 1, 2 and tmax and at P = 1 and 2, with the DSpark drafter and the
// replay drafter (replaying the sampled stream itself: full acceptance).
TEST_CASE("speculative sampling rounds: same seed, same tokens as plain sampling at every depth and split") {
  Checkpoint ckpt(tiny_dir());
  auto ops = make_cpu_ops();
  const ModelConfig& c = ckpt.config();
  const int64_t V = c.vocab_size;
  const int tmax = c.dspark.block_size + 1;
  const std::vector<LayerRange> one{{0, 7}}, two{{0, 4}, {4, 7}};
  for (uint64_t seed : {11u, 12u}) {
    const RowToken sample = [&, seed](const float* row, int64_t position) {
      const std::vector<double> p = softmax(row, V, 0.8);
      const double u = keyed_uniform(seed, position);
      CHECK(accept_point_mass(p, 0, u).token == inverse_cdf(p, u));
      return inverse_cdf(p, u);
    };
    const std::vector<int32_t> prompt = random_tokens(7, V, 900 + static_cast<uint32_t>(seed));
    const int64_t n_new = 24;
    DraftRun ref(ckpt, *ops);
    const std::vector<int32_t> expect = plain_stream(ref, prompt, n_new, sample);
    CHECK(expect != plain_stream(*std::make_unique<DraftRun>(ckpt, *ops), prompt, n_new));
    std::vector<int32_t> recorded = prompt;
    recorded.insert(recorded.end(), expect.begin(), expect.end());
    for (const auto* ranges : {&one, &two}) {
      for (int cap : {1, 2, tmax}) {
        for (bool replay : {false, true}) {
          CAPTURE(seed);
          CAPTURE(cap);
          CAPTURE(replay);
          ReplayDrafter replayer(recorded, {}, c.dspark.block_size, V,
                                 static_cast<int32_t>(c.dspark.noise_token_id));
          DraftRun run(ckpt, *ops, *ranges, replay ? &replayer : nullptr);
          LocalEngine engine(run, sample);
          SpecOptions opt;
          opt.p0 = static_cast<int64_t>(prompt.size());
          opt.n_new = n_new;
          opt.depth_cap = cap;
          opt.tmax = tmax;
          const SpecResult r = spec_generate(engine, run.start(prompt, sample), opt);
          CHECK(r.tokens == expect);
          if (replay && cap == tmax)
            for (const SpecRound& rd : r.rounds)
              if (rd.t_batch > 0) CHECK(rd.accepts == rd.t_batch - 1);
        }
      }
    }
  }
}
