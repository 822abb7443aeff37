// `spec_depth: auto` (stage/depth_schedule.h): the prefix survival and expected-token
// numbers by hand, the rule T = argmax E(T) / cost(T) (smallest on ties) against worked
// examples and an independent brute force, the cost file's refusals, and a simulation on
// scripted acceptance profiles: with calibrated confidences, the expected tokens per unit
// time of auto is at least that of the best fixed depth, for the built-in table and for
// a table measured by bench/spec_costs.sh.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/error.h"
#include "stage/depth_schedule.h"
#include "tests/unit/model/error_text.h"

using namespace dsv4;

namespace {

constexpr int kTmax = 6;  // B + 1 of the tiny and Flash drafters

std::string write_temp(const std::string& name, const std::string& text) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

VerifyCosts table(double propose, std::vector<double> verify) {
  VerifyCosts c;
  c.source = "test";
  c.propose_ms = propose;
  c.verify_ms = std::move(verify);
  return c;
}

float logit(double p) { return static_cast<float>(std::log(p / (1 - p))); }

// A round whose draft i+1 is accepted with probability p[i] given drafts 1..i were.
struct ScriptedRound {
  std::vector<double> p;
  std::vector<float> confidence() const {  // calibrated: sigmoid(confidence[i]) = p[i]
    std::vector<float> c;
    for (double x : p) c.push_back(logit(x));
    return c;
  }
  // Expected emitted tokens at T verify rows, from the scripted truth (not from the code).
  double tokens(int T) const {
    double e = 1, alive = 1;
    for (int t = 0; t + 1 < T; ++t) e += alive *= p[static_cast<size_t>(t)];
    return e;
  }
};

// Expected tokens per unit time of a run of `rounds`, depth(round) rows per round.
template <class Depth>
double rate(const std::vector<ScriptedRound>& rounds, const VerifyCosts& c, Depth depth) {
  double tokens = 0, time = 0;
  for (const ScriptedRound& r : rounds) {
    const int T = depth(r);
    tokens += r.tokens(T);
    time += c.propose_ms + c.verify_ms[static_cast<size_t>(T - 1)] + c.commit_ms;
  }
  return tokens / time;
}

}  // namespace

TEST_CASE("prefix survival and expected tokens: sigmoid products, NaN ends survival (S9)") {
  const std::vector<double> s = prefix_survival({0.0f, 0.0f, std::log(3.0f), NAN, 5.0f});
  REQUIRE(s.size() == 5);
  CHECK(s[0] == doctest::Approx(0.5));
  CHECK(s[1] == doctest::Approx(0.25));
  CHECK(s[2] == doctest::Approx(0.1875));  // x 0.75
  CHECK(s[3] == 0.0);
  CHECK(s[4] == 0.0);
  CHECK(expected_tokens(s, 1) == 1.0);
  CHECK(expected_tokens(s, 2) == doctest::Approx(1.5));
  CHECK(expected_tokens(s, 4) == doctest::Approx(1.9375));
  CHECK(expected_tokens(s, 6) == doctest::Approx(1.9375));
}

TEST_CASE("scheduled_depth: worked examples of E(T) / cost(T) under the built-in table") {
  // Built-in round cost: 0.2 + (1 + 0.06 (T - 1)) + 0.02 = 1.22, 1.28, 1.34, 1.40, 1.46, 1.52.
  const VerifyCosts b = builtin_verify_costs();
  CHECK(b.round_ms(1) == doctest::Approx(1.22));
  CHECK(b.round_ms(6) == doctest::Approx(1.52));
  auto depth = [&](double p, int ceiling = kTmax) {
    return scheduled_depth(std::vector<float>(5, logit(p)), b, ceiling);
  };
  // p = 0.5: E = 1, 1.5, 1.75, 1.875, 1.9375 -> rates .820 1.172 1.306 1.339 1.327: T = 4.
  CHECK(depth(0.5) == 4);
  // p = 0.9: rates keep rising up to 4.6851 / 1.52 = 3.08 at T = 6.
  CHECK(depth(0.9) == 6);
  CHECK(depth(0.9, 3) == 3);  // the structural ceiling bounds it
  // p = 0.05: 1.05 / 1.28 = 0.8203 > 1 / 1.22 = 0.8197 > 1.0525 / 1.34: T = 2.
  CHECK(depth(0.05) == 2);
  // p = 0.01: 1.01 / 1.28 < 1 / 1.22: T = 1.
  CHECK(depth(0.01) == 1);
  CHECK(scheduled_depth(std::vector<float>(5, NAN), b, kTmax) == 1);  // S9 noise drafts
  // Ties keep the smaller T: cost 1, 1.5, ... and p = 0.5 give rates 1, 1, 0.875, ...
  const VerifyCosts linear = table(0.5, {0.5, 1.0, 1.5, 2.0, 2.5, 3.0});
  CHECK(scheduled_depth(std::vector<float>(5, 0.0f), linear, kTmax) == 1);
  // Survival falls after draft 2: E = 1, 1.95, 2.8525, 2.88 ...; flat costs stop at T = 3.
  const VerifyCosts flat = table(0, {1, 1, 1, 1.01, 1.02, 1.03});
  CHECK(scheduled_depth({logit(0.95), logit(0.95), logit(0.03), 0, 0}, flat, kTmax) == 3);
  CHECK_THROWS_WITH_AS(scheduled_depth(std::vector<float>(5, 0.0f), table(0, {1, 1, 1}), 4),
                       doctest::Contains("covers T = 1..3"), Error);
}

TEST_CASE("scheduled_depth equals a brute force over T on random confidences and tables") {
  std::mt19937 rng(15);
  std::uniform_real_distribution<double> prob(0.01, 0.99), ms(0.1, 3.0);
  for (int trial = 0; trial < 500; ++trial) {
    ScriptedRound r;
    for (int i = 0; i < 5; ++i) r.p.push_back(prob(rng));
    std::vector<double> verify;
    double v = ms(rng);
    for (int T = 1; T <= kTmax; ++T) verify.push_back(v += ms(rng) * (trial % 3) / 4);
    const VerifyCosts c = table(ms(rng), verify);
    const int ceiling = 1 + trial % kTmax;
    int best = 1;
    for (int T = 2; T <= ceiling; ++T)
      if (r.tokens(T) / c.round_ms(T) > r.tokens(best) / c.round_ms(best) * (1 + 1e-12)) best = T;
    CAPTURE(trial);
    CHECK(scheduled_depth(r.confidence(), c, ceiling) == best);
  }
}

TEST_CASE("read_verify_costs: the bench's format; bad files are refused by field") {
  const VerifyCosts c = read_verify_costs(write_temp("dsv4_costs_ok.json",
      R"({"format": "dsv4-verify-costs/1", "propose_ms": 0.5, "commit_ms": 0.1,
          "verify_ms": [4.0, 4.2, 4.4], "verify_rounds": [3, 3, 3], "backend": "cuda"})"));
  CHECK(c.max_depth() == 3);
  CHECK(c.round_ms(2) == doctest::Approx(4.8));
  CHECK(load_verify_costs("").source == "built-in");
  CHECK(load_verify_costs("").max_depth() == 16);
  auto refusal = [](const std::string& name, const std::string& text) {
    return test::error_text([&] { read_verify_costs(write_temp(name, text)); });
  };
  CHECK(refusal("dsv4_costs_f.json", R"({"format": "x", "propose_ms": 0})").find("\"format\"") !=
        std::string::npos);
  CHECK(refusal("dsv4_costs_p.json", R"({"format": "dsv4-verify-costs/1", "propose_ms": -1,
        "commit_ms": 0, "verify_ms": [1]})").find("\"propose_ms\" = -1") != std::string::npos);
  CHECK(refusal("dsv4_costs_c.json", R"({"format": "dsv4-verify-costs/1", "propose_ms": 0,
        "verify_ms": [1]})").find("\"commit_ms\" missing") != std::string::npos);
  CHECK(refusal("dsv4_costs_v.json", R"({"format": "dsv4-verify-costs/1", "propose_ms": 0,
        "commit_ms": 0, "verify_ms": [1, 2, 0]})").find("\"verify_ms\"[2] (T = 3)") !=
        std::string::npos);
  CHECK(refusal("dsv4_costs_e.json", R"({"format": "dsv4-verify-costs/1", "propose_ms": 0,
        "commit_ms": 0, "verify_ms": []})").find("non-empty") != std::string::npos);
  CHECK(refusal("dsv4_costs_j.json", "{").find("not valid JSON") != std::string::npos);
  CHECK_THROWS_WITH_AS(read_verify_costs("/nonexistent/costs.json"),
                       doctest::Contains("/nonexistent/costs.json: cannot open"), Error);
}

// Scripted acceptance profiles with calibrated confidences: confident rounds (the
// random-token band of a replay), the real-task band, hard rounds, and a flat 0.6.
TEST_CASE("auto depth: expected tokens per unit time >= the best fixed depth (simulation)") {
  const ScriptedRound confident{{0.95, 0.95, 0.95, 0.95, 0.95}};
  const ScriptedRound real{{0.8, 0.7, 0.6, 0.5, 0.4}};
  const ScriptedRound hard{{0.3, 0.2, 0.1, 0.1, 0.1}};
  const ScriptedRound flat{{0.6, 0.6, 0.6, 0.6, 0.6}};
  const std::vector<ScriptedRound> mixed{confident, confident, real, hard, real,
                                         confident, hard,      hard, flat, real};
  const std::string measured = std::string(DSV4_SOURCE_DIR) + "/bench/costs/tiny-cpu-np1.json";
  for (const VerifyCosts& costs : {builtin_verify_costs(), read_verify_costs(measured)}) {
    CAPTURE(costs.source);
    auto scheduled = [&](const ScriptedRound& r) {
      return scheduled_depth(r.confidence(), costs, kTmax);
    };
    auto best_fixed = [&](const std::vector<ScriptedRound>& rounds) {
      double best = 0;
      for (int T = 1; T <= kTmax; ++T)
        best = std::max(best, rate(rounds, costs, [T](const ScriptedRound&) { return T; }));
      return best;
    };
    const double mixed_auto = rate(mixed, costs, scheduled), mixed_fixed = best_fixed(mixed);
    MESSAGE(costs.source, ": auto ", mixed_auto, " tokens per ms, best fixed ", mixed_fixed);
    CHECK(mixed_auto >= mixed_fixed);
    CHECK(mixed_auto > 1.02 * mixed_fixed);  // a mixed profile gains from scheduling
    for (const ScriptedRound& r : {confident, real, hard, flat}) {  // stationary: a tie
      const std::vector<ScriptedRound> same(4, r);
      CHECK(rate(same, costs, scheduled) == doctest::Approx(best_fixed(same)).epsilon(1e-12));
    }
  }
}
