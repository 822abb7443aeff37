#include "stage/depth_schedule.h"

#include <cmath>

#include "base/error.h"
#include "model/json_strict.h"

namespace dsv4 {

namespace {

constexpr const char* kCostsFormat = "dsv4-verify-costs/1";

double cost_field(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || !j.at(key).is_number())
    throw Error(cat("spec costs ", path, ": \"", key, "\" missing or not a number"));
  const double v = j.at(key).get<double>();
  if (!std::isfinite(v) || v < 0)
    throw Error(cat("spec costs ", path, ": \"", key, "\" = ", v, " (must be finite, >= 0)"));
  return v;
}

}  // namespace

double VerifyCosts::round_ms(int T) const {
  DSV4_CHECK(T >= 1 && T <= max_depth(), "verify costs of ", source, ": T ", T, " outside [1, ",
             max_depth(), "]");
  return propose_ms + verify_ms[static_cast<size_t>(T - 1)] + commit_ms;
}

VerifyCosts builtin_verify_costs() {
  VerifyCosts c;
  c.source = "built-in";
  c.propose_ms = 0.2;
  c.commit_ms = 0.02;
  for (int T = 1; T <= 16; ++T) c.verify_ms.push_back(1.0 + 0.06 * (T - 1));
  return c;
}

VerifyCosts read_verify_costs(const std::string& path) {
  const nlohmann::json j = load_json_strict(path, "spec costs");
  if (!j.is_object() || j.value("format", "") != kCostsFormat)
    throw Error(cat("spec costs ", path, ": \"format\" is not \"", kCostsFormat, "\""));
  VerifyCosts c;
  c.source = path;
  c.propose_ms = cost_field(j, "propose_ms", path);
  c.commit_ms = cost_field(j, "commit_ms", path);
  if (!j.contains("verify_ms") || !j.at("verify_ms").is_array() || j.at("verify_ms").empty())
    throw Error(cat("spec costs ", path, ": \"verify_ms\" missing or not a non-empty array"));
  const nlohmann::json& v = j.at("verify_ms");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number() || !std::isfinite(v[i].get<double>()) || v[i].get<double>() <= 0)
      throw Error(cat("spec costs ", path, ": \"verify_ms\"[", i, "] (T = ", i + 1,
                      ") is not a positive number"));
    c.verify_ms.push_back(v[i].get<double>());
  }
  return c;
}

VerifyCosts load_verify_costs(const std::string& path) {
  return path.empty() ? builtin_verify_costs() : read_verify_costs(path);
}

std::vector<double> prefix_survival(const std::vector<float>& confidence) {
  std::vector<double> s;
  double p = 1;
  for (float logit : confidence) {
    const double x = logit;
    p *= std::isfinite(x) ? 1.0 / (1.0 + std::exp(-x)) : 0.0;  // sigmoid; S9 NaN: survival 0
    s.push_back(p);
  }
  return s;
}

double expected_tokens(const std::vector<double>& survival, int T) {
  DSV4_CHECK(T >= 1 && T - 1 <= static_cast<int>(survival.size()), "expected tokens at T ", T,
             " with ", survival.size(), " drafts");
  double e = 1;
  for (int t = 1; t < T; ++t) e += survival[static_cast<size_t>(t - 1)];
  return e;
}

int scheduled_depth(const std::vector<float>& confidence, const VerifyCosts& costs, int ceiling) {
  DSV4_CHECK(ceiling >= 1 && ceiling - 1 <= static_cast<int>(confidence.size()),
             "scheduled depth: ceiling ", ceiling, " with ", confidence.size(), " drafts");
  if (ceiling > costs.max_depth())
    throw Error(cat("spec costs ", costs.source, ": verify_ms covers T = 1..", costs.max_depth(),
                    " but a round may verify ", ceiling, " rows"));
  const std::vector<double> s = prefix_survival(confidence);
  int best = 1;
  double best_rate = expected_tokens(s, 1) / costs.round_ms(1);
  for (int T = 2; T <= ceiling; ++T) {
    const double rate = expected_tokens(s, T) / costs.round_ms(T);
    if (rate > best_rate) {  // strict: ties keep the smaller T
      best = T;
      best_rate = rate;
    }
  }
  return best;
}

}  // namespace dsv4
