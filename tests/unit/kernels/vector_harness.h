// Reader for the op-level test vectors (tests/data/testvectors/README.md "Format") and the
// README's comparison rule: keys in tolerance.exact match by value (-0.0 == +0.0), every
// other key satisfies |got - exp| <= abs + rel*|exp| with per_key overriding the case's
// rel/abs. A failure reports the key, the worst element and its flat index.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/tensor_view.h"

namespace dsv4::test {

// One {shape, dtype, data} array, data row-major; values kept as double (exact for
// f32/f64 and for the integer dtypes used).
struct VectorArray {
  std::vector<int64_t> shape;
  std::string dtype;
  std::vector<double> data;

  int64_t dim(size_t i) const { return shape.at(i); }
  size_t size() const { return data.size(); }
  std::vector<float> f32() const { return std::vector<float>(data.begin(), data.end()); }
  std::vector<int64_t> i64() const { return convert<int64_t>(); }
  std::vector<int32_t> i32() const { return convert<int32_t>(); }
  std::vector<uint8_t> u8() const { return convert<uint8_t>(); }

 private:
  template <class T>
  std::vector<T> convert() const {
    std::vector<T> out(data.size());
    std::transform(data.begin(), data.end(), out.begin(), [](double v) { return T(v); });
    return out;
  }
};

inline VectorArray to_array(const nlohmann::json& j) {
  VectorArray a;
  if (j.is_object()) {
    a.shape = j.at("shape").get<std::vector<int64_t>>();
    a.dtype = j.at("dtype").get<std::string>();
    for (const auto& v : j.at("data")) a.data.push_back(v.get<double>());
  } else {  // scalar
    a.dtype = "scalar";
    a.data.push_back(j.get<double>());
  }
  return a;
}

struct Tol {
  double rel = 0, abs = 0;
  bool exact = false;
};

struct VectorCase {
  std::string file, name, note;
  nlohmann::json params, inputs, expected, tolerance;

  VectorArray input(const std::string& key) const { return to_array(inputs.at(key)); }
  VectorArray expect(const std::string& key) const { return to_array(expected.at(key)); }
  bool has_expected(const std::string& key) const { return expected.contains(key); }
  template <class T>
  T param(const std::string& key) const { return params.at(key).get<T>(); }

  Tol tol(const std::string& key) const {
    Tol t;
    if (tolerance.contains("exact")) {
      for (const auto& k : tolerance.at("exact"))
        if (k.get<std::string>() == key) t.exact = true;
    }
    const nlohmann::json* src = &tolerance;
    if (tolerance.contains("per_key") && tolerance.at("per_key").contains(key))
      src = &tolerance.at("per_key").at(key);
    t.rel = src->value("rel", 0.0);
    t.abs = src->value("abs", 0.0);
    return t;
  }
};

// An F32 TensorView over `data` (which must outlive the view), for ops taking weights.
inline TensorView f32_view(const std::string& name, std::vector<int64_t> shape,
                           const std::vector<float>& data) {
  TensorView t;
  t.name = name;
  t.dtype = DType::F32;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const uint8_t*>(data.data());
  t.nbytes = data.size() * sizeof(float);
  return t;
}

// Cases of `file` (relative to DSV4_TESTVECTORS_DIR) whose params.op equals `op`.
inline std::vector<VectorCase> load_cases(const std::string& file, const std::string& op) {
  const std::string path = std::string(DSV4_TESTVECTORS_DIR) + "/" + file;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open test vector file " << path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<VectorCase> out;
  for (const auto& c : doc.at("cases")) {
    if (c.at("params").at("op").get<std::string>() != op) continue;
    out.push_back(VectorCase{file, c.at("name").get<std::string>(), c.value("note", ""),
                             c.at("params"), c.value("inputs", nlohmann::json::object()),
                             c.at("expected"), c.at("tolerance")});
  }
  REQUIRE_MESSAGE(!out.empty(), "no case with params.op == " << op << " in " << path);
  return out;
}

// Compares `got` (flat, row-major) with expected[key] under the README rule.
template <class T>
void compare_key(const VectorCase& c, const std::string& key, const std::vector<T>& got) {
  const VectorArray exp = c.expect(key);
  const Tol t = c.tol(key);
  INFO(c.file, " case ", c.name, " key ", key);
  REQUIRE(got.size() == exp.size());
  double worst_excess = -1;  // max of err - bound, or of err for exact keys
  size_t worst = 0;
  size_t n_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), e = exp.data[i];
    const double err = std::isnan(g) ? INFINITY : std::fabs(g - e);
    const double bound = t.exact ? 0.0 : t.abs + t.rel * std::fabs(e);
    const bool ok = t.exact ? g == e : err <= bound;
    if (!ok) ++n_bad;
    const double excess = err - bound;
    if (excess > worst_excess || i == 0) {
      worst_excess = excess;
      worst = i;
    }
  }
  const std::string rule = t.exact ? std::string(" (exact)")
                                   : cat(" (rel ", t.rel, ", abs ", t.abs, ")");
  INFO("worst element [", worst, "]: got ", double(got[worst]), " expected ", exp.data[worst],
       rule);
  CHECK_MESSAGE(n_bad == 0, n_bad, " of ", got.size(), " elements outside the bound");
}

}  // namespace dsv4::test
